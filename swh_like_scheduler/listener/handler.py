"""Applying run events to the store, each outcome exactly once.

Mapping (the run is found by its ``backend_id``, the Celery task id):

==================  =====================================================
event               store effect
==================  =====================================================
``task-started``    ``start_task_runs`` (started=event time, worker=hostname)
``task-succeeded``  end with ``classify_result(parsed result)``
``task-result``     same, with the real return value
``task-failed``     end ``failed``, error = the exception's text
``task-revoked``    end ``cancelled`` (``lost`` when the message expired)
``task-rejected``   end ``lost`` (no requeue); nothing when requeued
``task-retried``    nothing: the same id runs again, the run stays open
others              nothing (``task-received``, …)
==================  =====================================================

Worker events (heartbeat, online, offline) are applied by
:meth:`EventHandler.handle_batch` (the consumer's path) after the batch's run
events: each worker's latest event is recorded (its own timestamp and main
process id). A ``worker-offline`` ends nothing at once: a warm shutdown
sends it first and then finishes its runs, a broker reconnect sends it and
comes back; the monitor ends the runs of a worker still offline after a
grace (:meth:`SchedulerStore.sweep_silent_workers`). A worker that comes
back under the same name from a **new process** (a restart after a crash)
proves the old one gone once the old one has been silent for a few
heartbeats (two processes that both keep sending are two live workers under
one name: logged, at most once a minute per name, and nothing ended): its
runs are ended ``lost``, with the same ``apply`` as any end
(:meth:`SchedulerStore.end_worker_runs`).
The single-event :meth:`EventHandler.handle` is about runs only.

An end is written with :meth:`SchedulerStore.end_task_runs` (a batch's ends
together, as if one by one) and an ``apply``
callback running :func:`policy.apply_outcome` in the same transaction, with
the task locked: the run's end and the task's new state (next_run, deadline,
statistics, status back to ``waiting``, or ``completed`` for a one-shot) are
recorded together or not at all.

Duplicates and disorder: the run row is the guard. ``start_task_runs`` leaves a
started or ended run unchanged; ``end_task_runs`` leaves an ended run unchanged
and then does not call ``apply``, so a second end event changes nothing. An end
that arrives before its start first records the start it implies (``event
time - runtime``, when the event carries a runtime) and then the end; the late
start event finds the run ended and changes nothing. Events for ids that are
not runs of ours are ignored.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from ..domain.model import RunStatus, Task, TaskRun
from ..domain.records import STALE_END, WorkerChangeKind, WorkerSighting
from ..plumbing.quietlog import QuietLog
from ..policy import RandomSource
from ..recording import TaskTypeCache, outcome_applier
from ..recurrent.events import VISIT_EVENT, VisitFeed
from ..store import SchedulerStore
from ..store.interface import RunEnd
from . import poison
from .actions import Action, BatchSummary, HandleResult
from .blind import BlindWatch
from .clocks import WorkerClocks
from .events import EventKind, RunEvent, parse_event, parse_worker_event

logger = logging.getLogger(__name__)
#: a worker name used by two live processes: said at most once a minute per name
_duplicates = QuietLog(logger, logging.WARNING)
DUPLICATE_NAME = (
    "worker name %s is used by two live main processes (pids %s and %s): neither is "
    "taken for a restart of the other and their runs are left to them; give each worker "
    "its own name (celery worker -n NAME@%%h)"
)


class _RecentStarts:
    """Bounded memory of runs known to be started, to skip a redundant start
    write before an end. Losing an entry only costs one idempotent write."""

    def __init__(self, size: int = 100_000) -> None:
        self._size = size
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, backend_id: str) -> None:
        with self._lock:
            self._ids[backend_id] = None
            self._ids.move_to_end(backend_id)
            while len(self._ids) > self._size:
                self._ids.popitem(last=False)

    def pop(self, backend_id: str) -> bool:
        with self._lock:
            return self._ids.pop(backend_id, False) is None


class EventHandler:
    """Applies run events to a store. Safe to use from several threads for
    events of *different* runs (see :meth:`handle_batch`)."""

    def __init__(
        self,
        store: SchedulerStore,
        task_types: TaskTypeCache | None = None,
        *,
        rng: RandomSource,
    ) -> None:
        self.store = store
        self.task_types = task_types or TaskTypeCache(store)
        self._apply = outcome_applier(self.task_types, rng)
        self._visits = VisitFeed(store)
        self._started = _RecentStarts()
        #: workers taking tasks without task events, from their heartbeats
        #: (``None``: not watched)
        self.watch: BlindWatch | None = None
        #: the workers' clocks, and the database's (:mod:`.clocks`): with
        #: both, events' instants are moved onto the database's clock
        self.clocks: WorkerClocks | None = None
        self.clock: Callable[[], datetime] | None = None
        #: the lanes' threads, kept from batch to batch (see :meth:`handle_batch`)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lanes = 0

    # -- one event ------------------------------------------------------------

    def handle(self, event: Mapping[str, Any]) -> HandleResult:
        """Apply one raw Celery event (see the module doc for the mapping)."""
        run_event = poison.guarded(parse_event, event)
        if run_event is None:
            return HandleResult(Action.IGNORED, _uuid(event))
        return self.apply(run_event)

    def apply(self, event: RunEvent, store: SchedulerStore | None = None) -> HandleResult:
        """Apply one parsed run event (through ``store``: e.g. a batch's
        transaction; default the handler's store)."""
        target = store if store is not None else self.store
        if event.kind is EventKind.START:
            return self._start(event, target)
        if event.kind is EventKind.END:
            return self._end(event, target)
        if event.kind is EventKind.AGAIN:
            return HandleResult(Action.KEPT_OPEN, event.backend_id)
        return HandleResult(Action.IGNORED, event.backend_id)

    def _start(self, event: RunEvent, store: SchedulerStore) -> HandleResult:
        run = store.start_task_run(event.backend_id, started=event.at, worker=event.worker)
        return self._started_result(event, run)

    def _started_result(self, event: RunEvent, run: TaskRun | None) -> HandleResult:
        """What a start event did, from its run as it is after the start."""
        if run is None:
            return HandleResult(Action.UNKNOWN_RUN, event.backend_id)
        if run.status is RunStatus.STARTED:
            # known started (by this event, or already by the worker's start
            # guard): its end needs no implied start
            self._started.add(event.backend_id)
            if run.started == event.at:
                return HandleResult(Action.STARTED, event.backend_id, run)
        return HandleResult(Action.DUPLICATE, event.backend_id, run)

    def _end(self, event: RunEvent, store: SchedulerStore) -> HandleResult:
        return self._end_all([event], store)[0]

    # -- batches --------------------------------------------------------------

    def handle_batch(
        self, events: Sequence[Mapping[str, Any]], *, lanes: int = 1, fresh: bool = True
    ) -> BatchSummary:
        """Apply a batch of raw events in order and count what they did.

        Within a batch a run's start is applied before its end even when the
        end came first (so the start's own time is kept). With ``lanes`` > 1
        events are spread over that many threads by run id, each lane keeping
        the batch's order: events of one run stay in order, and runs of one
        task cannot be in the same batch unordered (a task's next run is
        dispatched only after its previous end was written). Worker events
        come after the run events, counted as :attr:`Action.WORKER`. Exceptions (the
        store is down) propagate after every lane stopped; the batch may then
        be applied again, which is harmless. ``fresh``: the batch was taken
        with the queue empty behind it (not full), so its heartbeats were
        received about when they were sent: only then do they measure the
        workers' clocks (:mod:`.clocks`).
        """
        parsed = [poison.guarded(parse_event, e) for e in events]
        summary = BatchSummary()
        sightings: list[WorkerSighting] = []
        visits: list[Mapping[str, Any]] = []
        for event, run_event in zip(events, parsed, strict=True):
            if (
                run_event is None
                and isinstance(event, Mapping)
                and event.get("type") == VISIT_EVENT
            ):
                visits.append(event)
            elif run_event is None:
                sighting = poison.guarded(parse_worker_event, event)
                if sighting is not None:
                    sightings.append(sighting)
                    summary.add(HandleResult(Action.WORKER))
                else:
                    summary.add(HandleResult(Action.IGNORED, _uuid(event)))
        run_events = [e for e in parsed if e is not None]
        offsets: dict[str, float | None] = {}
        if self.clocks is not None and self.clock is not None:
            # the workers' instants onto the database's clock (.clocks)
            if fresh:
                offsets = self.clocks.observe(sightings, self.clock())
            run_events = [self.clocks.event(e) for e in run_events]
            sightings = [self.clocks.sighting(s) for s in sightings]
        if lanes <= 1 or len(run_events) < 2 * lanes:
            summary.merge(self._apply_ordered(run_events))
        else:
            split: list[list[RunEvent]] = [[] for _ in range(lanes)]
            for run_event in run_events:
                split[zlib.crc32(run_event.backend_id.encode()) % lanes].append(run_event)
            for part in self._lanes(lanes).map(self._apply_ordered, [s for s in split if s]):
                summary.merge(part)
        if visits:
            changed, ignored = self._visits.apply(visits)
            summary.counts[Action.VISIT] = summary[Action.VISIT] + changed
            summary.counts[Action.IGNORED] = summary[Action.IGNORED] + ignored
        # after the run events: a run that ended just before its worker went
        # offline keeps its real outcome
        self._apply_sightings(sightings)
        if offsets:
            self.store.record_worker_clocks(offsets)
        if self.watch is not None:
            windows = self.watch.observe(run_events, sightings)
            if windows:
                self.store.mark_blind_workers(windows)
        return summary

    def _lanes(self, lanes: int) -> ThreadPoolExecutor:
        """Threads for ``lanes`` lanes, started once (not for every batch)."""
        pool = self._pool
        if pool is None or self._pool_lanes != lanes:
            if pool is not None:
                pool.shutdown(wait=False)
            pool = self._pool = ThreadPoolExecutor(
                max_workers=lanes, thread_name_prefix="listener-lane"
            )
            self._pool_lanes = lanes
        return pool

    def close(self) -> None:
        """Stop the lanes' threads (they also stop when the handler is
        garbage collected)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # -- worker events ----------------------------------------------------------

    def handle_worker_events(self, events: Sequence[Mapping[str, Any]]) -> list[TaskRun]:
        """Apply the worker events among ``events``; returns the runs lost."""
        return self._apply_sightings(
            [s for s in (poison.guarded(parse_worker_event, e) for e in events) if s is not None]
        )

    def _apply_sightings(self, sightings: Sequence[WorkerSighting]) -> list[TaskRun]:
        if not sightings:
            return []
        changes = self.store.record_worker_sightings(sightings)
        lost: list[TaskRun] = []
        for change in changes:
            if change.kind is WorkerChangeKind.DUPLICATE:
                _duplicates.log(
                    DUPLICATE_NAME,
                    change.hostname,
                    change.other_pid,
                    change.pid,
                    key=change.hostname,
                )
                continue
            ended = self.store.end_worker_runs(
                change.hostname, at=change.at, apply=self._apply, pid=change.pid
            )
            for run in ended:
                logger.warning(
                    "run %s lost: worker %s came back as a new process (pid %s; pid %s is silent)",
                    run.backend_id,
                    run.worker,
                    change.pid,
                    change.other_pid,
                )
            lost.extend(ended)
        return lost

    def _apply_ordered(self, events: Iterable[RunEvent]) -> BatchSummary:
        """Apply events in order, all in one store transaction (one commit
        per batch instead of one per event), in a few statements: first the
        batch's starts together (so a run's start comes before its end even
        when the end came first, keeping the start's own time), then the
        starts that ends imply (start event late or lost), then the ends in
        order. As if applied one by one, start-first."""
        events = list(events)
        summary = BatchSummary()
        with self.store.transaction() as store:
            run_starts = [e for e in events if e.kind is EventKind.START]
            started = store.start_task_runs([(e.backend_id, e.at, e.worker) for e in run_starts])
            for event in run_starts:
                summary.add(self._started_result(event, started.get(event.backend_id)))
            ends: list[RunEvent] = []
            for event in events:
                if event.kind is EventKind.END:
                    ends.append(event)
                elif event.kind is not EventKind.START:
                    summary.add(self.apply(event, store))
            for result in self._end_all(ends, store):
                summary.add(result)
        return summary

    def _end_all(self, ends: list[RunEvent], store: SchedulerStore) -> list[HandleResult]:
        """What each of ``ends`` did, applied in order, with one store call
        for the starts they imply (start event late or lost) and one for the
        ends; ``apply`` is called once per run that really ends."""
        results: list[HandleResult] = []
        implied = [e for e in ends if not self._started.pop(e.backend_id) and e.started is not None]
        runs = store.start_task_runs(
            [(e.backend_id, min(e.started, e.at), e.worker) for e in implied if e.started]
        )  # (every implied end has ``started``: the condition narrows its type)
        refused = set()
        for event in implied:
            run = runs.get(event.backend_id)
            if run is None or not (run.status.is_open or run.status is RunStatus.LOST):
                refused.add(id(event))
                action = Action.UNKNOWN_RUN if run is None else Action.DUPLICATE
                results.append(HandleResult(action, event.backend_id, run))
        ending = [
            RunEnd(e.backend_id, e.status, e.at, e.result, e.error)
            for e in ends
            if id(e) not in refused and e.status is not None
        ]
        applied: set[str] = set()

        def apply(task: Task, run: TaskRun) -> Task:
            applied.add(run.backend_id)
            return self._apply(task, run)

        ended = store.end_task_runs(ending, apply=apply)
        for end, run in zip(ending, ended, strict=True):
            if run is None:
                results.append(HandleResult(Action.UNKNOWN_RUN, end.backend_id))
            elif _superseded_now(run, end):
                stale = run.history[-1]
                since = (
                    f"run {stale.get('by')} (fencing token {stale.get('by_fence')}) had started "
                    "since"
                    if stale.get("by") is not None
                    else f"the task's fencing token had moved past it (to {stale.get('by_fence')})"
                    if stale.get("by_fence") is not None
                    else "its token had moved"
                )
                logger.warning(
                    "run %s of task %s ended %s after it was taken from its copy, and %s: "
                    "recorded as superseded (token %s), not applied",
                    run.backend_id,
                    run.task_id,
                    end.status,
                    since,
                    run.fence,
                )
                results.append(HandleResult(Action.SUPERSEDED, end.backend_id, run, end.status))
            elif end.backend_id in applied and run.ended == end.ended:
                applied.discard(end.backend_id)  # a second end of the run is a duplicate
                results.append(HandleResult(Action.ENDED, end.backend_id, run, end.status))
            else:
                results.append(HandleResult(Action.DUPLICATE, end.backend_id, run))
        return results


def _superseded_now(run: TaskRun, end: RunEnd) -> bool:
    """Whether ``end`` is what made ``run`` superseded (a stale copy's end)."""
    return (
        run.status is RunStatus.SUPERSEDED
        and run.ended == end.ended
        and bool(run.history)
        and run.history[-1].get("event") == STALE_END
    )


def _uuid(event: Mapping[str, Any]) -> str | None:
    if not isinstance(event, Mapping):
        return None
    value = event.get("uuid")
    return value if isinstance(value, str) else None


def handle_event(
    event: Mapping[str, Any],
    store: SchedulerStore,
    task_types: TaskTypeCache | None = None,
    *,
    rng: RandomSource,
) -> HandleResult:
    """Apply one raw Celery event to ``store`` (a one-off :class:`EventHandler`)."""
    return EventHandler(store, task_types, rng=rng).handle(event)


def handle_events(
    events: Sequence[Mapping[str, Any]],
    store: SchedulerStore,
    task_types: TaskTypeCache | None = None,
    *,
    rng: RandomSource,
    lanes: int = 1,
) -> BatchSummary:
    """Apply a batch of raw Celery events to ``store`` in order."""
    return EventHandler(store, task_types, rng=rng).handle_batch(events, lanes=lanes)
