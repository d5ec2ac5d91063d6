"""One pass of the monitor's duties, and the loop that repeats it.

A pass first takes (or renews) the monitor's lock in the store; a process
that does not hold it does nothing (``skipped: not the monitor``), so any
number of runners and ``start-monitor`` processes may try and exactly one
does the duties. A holder that stops renewing (crash, ``kill -9``) loses the
lock ``lock_ttl`` later and another takes over. Then, in order:

1. **steal**: the runs whose copy (the process running the body: a
   lease's pings, the heartbeat of every guarded run) has not renewed them
   for ``ping_timeout`` are put on notice, and taken after ``grace``
   (database clock);
2. **silent workers**: workers without a heartbeat for ``worker_timeout``
   are marked offline; the runs no start guard took, of workers offline for
   longer than ``offline_grace``, end ``lost`` (a warm shutdown says
   offline, then finishes its runs; their real outcomes come first);
3. **one-shot expiry**: waiting one-shot tasks with a ``max_delay``, never
   dispatched, whose should_start_by passed more than ``oneshot_expiry_grace``
   ago, and that a runner pass with room which *began* after that (and
   after the task was created, last changed and ready) could still not take
   (banned nodes, a blackout window), are disabled; a pass that left a
   ready task behind (a row another transaction held) has no room; a
   one-shot late because no runner passed or its queue was full is never
   expired;
4. **retention**: runs ended more than ``keep_runs`` ago (and dispatch
   batches claimed as long ago), and finished one-shot tasks unchanged for
   ``keep_finished_oneshots``, deleted in bounded batches;
5. **re-publish** (with a Celery app): runs claimed ``orphaned_after`` ago
   whose messages were never sent (a runner died), and runs published
   ``republish_after`` ago that never started and are not in their queue,
   are published again with the same id (:mod:`..runner.republish`);
6. **load**: every ``load_every``, each task type's adaptive tasks are
   measured (demand at their intervals, work delivered over the last
   ``load_window``, how many overdue by more than ``load_slack``) and the
   measurement kept on the type, for the capacity-aware interval rule
   (:meth:`SchedulerStore.measure_type_loads`, :mod:`..policy.capacity`);
7. **census**: the schedule-health census step (:mod:`..health.census`):
   the tasks whose condition may have changed are assessed again and the
   counts stored, when the latest census is older than five times what it
   cost (within 10 s or ``period`` and ``census_every``), for ``census_budget``
   seconds at most per pass (a first census of millions of tasks spans
   passes);
8. **stuck index claims** (with the Redis index): ids a runner took from
   the index and did not claim in the database within the claim's time
   limit and a margin (:func:`~..index.keeper.hold_of`: it died in
   between; refused ids parked :data:`~..index.CLAIM_TIMEOUT`) are filed again
   from the database, for every task type (runners do it too, for the
   types they dispatch).

Duties 2-7 run on the caller's clock (``now``), the lock and the steal
step on the database's.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from celery import Celery

from ..dispatch.republish import ORPHANED_AFTER, republish_unstarted
from ..dispatch.routing import LiveWorkers
from ..domain.exceptions import InvalidInput, SchedulerError
from ..domain.lease import StealReport
from ..domain.records import MONITOR_LOCK, default_holder
from ..health.census import Refresh, refresh
from ..plumbing.outage import Outage
from ..recording import TaskTypeCache, outcome_applier
from ..store import SchedulerStore
from ..store.interface import ApplyOutcome
from .report import NOT_THE_MONITOR, MonitorReport
from .terms import publish_terms

if TYPE_CHECKING:
    from ..index.keeper import IndexKeeper

logger = logging.getLogger(__name__)

_ZERO = timedelta(0)
#: how long after its should_start_by a one-shot task with a ``max_delay``
#: may still start before it can expire (and only if a runner had room)
ONESHOT_EXPIRY_GRACE = timedelta(minutes=5)
#: how often each task type's load is measured, over what window, and how
#: long a ready task may wait before it counts as overdue (the runner's
#: period and sleep, and the listener's delay, stay well under it)
LOAD_EVERY = timedelta(minutes=5)
LOAD_WINDOW = timedelta(hours=1)
LOAD_SLACK = timedelta(minutes=5)
#: the oldest a stored census may get, and the seconds a pass may spend on it
CENSUS_EVERY = timedelta(seconds=60)
CENSUS_BUDGET = 5.0
#: and the youngest it is counted again at (a monitor with a short period
#: keeps its passes short: the steal step's pace is what matters there)
CENSUS_FLOOR = timedelta(seconds=10)


@dataclass(frozen=True)
class MonitorSettings:
    """The monitor's durations and bounds (DESIGN.md §4; tests use seconds).

    Steal protocol: ``ping_timeout`` (silence after which an owner is put on
    notice) and ``grace`` (then the time it has to ping before its run is
    lost). ``worker_timeout``: a plain worker silent that long is offline
    (``None``: per worker, the longer of 3 x its heartbeat period and 180 s);
    ``offline_grace``: how long after a worker's ``worker-offline`` its open
    runs may still report before they are ended ``lost``.
    ``oneshot_expiry_grace``: extra time after a one-shot task's
    should_start_by before it may expire (a task with ``max_delay`` only,
    and only once a runner pass that began after that had room for it:
    :meth:`SchedulerStore.expire_oneshot_tasks`). ``keep_runs`` / ``keep_finished_oneshots``:
    retention, at most ``retention_limit`` rows of each kind per pass.
    ``republish_after``: ``None`` disables re-publishing lost messages;
    ``orphaned_after``: how long a claim may stay unpublished before its runs
    are published by the monitor (its runner died). ``batch_size``: at
    most that many tasks/runs per duty and pass. ``lock_ttl``: how long the
    lock outlives its last renewal; ``holder``: this monitor's identity
    (``None``: ``hostname:pid:random``, one per process). ``period``: the
    pause between two passes of the loop (keep it well under ``lock_ttl``).
    """

    ping_timeout: timedelta = timedelta(seconds=30)
    grace: timedelta = timedelta(seconds=30)
    period: timedelta = timedelta(seconds=10)
    worker_timeout: timedelta | None = None
    offline_grace: timedelta = timedelta(seconds=60)
    oneshot_expiry_grace: timedelta = ONESHOT_EXPIRY_GRACE
    keep_runs: timedelta = timedelta(days=90)
    keep_finished_oneshots: timedelta = timedelta(days=30)
    retention_limit: int = 10_000
    republish_after: timedelta | None = timedelta(minutes=5)
    orphaned_after: timedelta = ORPHANED_AFTER
    batch_size: int = 1000
    lock_ttl: timedelta = timedelta(seconds=60)
    holder: str | None = None
    load_every: timedelta = LOAD_EVERY
    load_window: timedelta = LOAD_WINDOW
    load_slack: timedelta = LOAD_SLACK
    census_every: timedelta = CENSUS_EVERY
    #: ``None``: :data:`CENSUS_BUDGET`, or a quarter of ``lock_ttl`` when shorter
    census_budget: float | None = None

    def __post_init__(self) -> None:
        positive = (
            "ping_timeout",
            "grace",
            "period",
            "keep_runs",
            "keep_finished_oneshots",
            "orphaned_after",
            "load_every",
            "load_window",
            "census_every",
        )
        for name in (*positive, "lock_ttl"):
            if getattr(self, name) <= _ZERO:
                raise InvalidInput(name, f"{getattr(self, name)} must be longer than zero")
        for name in ("worker_timeout", "republish_after"):
            value = getattr(self, name)
            if value is not None and value <= _ZERO:
                raise InvalidInput(name, f"{value} must be longer than zero (or unset)")
        if self.offline_grace < _ZERO:
            raise InvalidInput("offline_grace", f"{self.offline_grace} is negative")
        if self.load_slack < _ZERO:
            raise InvalidInput("load_slack", f"{self.load_slack} is negative")
        if self.oneshot_expiry_grace < _ZERO:
            raise InvalidInput("oneshot_expiry_grace", f"{self.oneshot_expiry_grace} is negative")
        if self.lock_ttl <= self.period:
            raise InvalidInput(
                "lock_ttl", f"{self.lock_ttl} must be longer than the period {self.period}"
            )
        if self.census_budget is not None and not (
            0 < self.census_budget < self.lock_ttl.total_seconds() / 2
        ):
            raise InvalidInput(
                "census_budget",
                f"{self.census_budget} s must be more than zero and under half the lock's "
                f"time to live ({self.lock_ttl}): a pass renews the lock once",
            )
        for name in ("retention_limit", "batch_size"):
            if getattr(self, name) < 1:
                raise InvalidInput(name, f"{getattr(self, name)} must be at least 1")

    @property
    def census_seconds(self) -> float:
        """The seconds a pass may spend on the census."""
        if self.census_budget is not None:
            return self.census_budget
        return min(CENSUS_BUDGET, self.lock_ttl.total_seconds() / 4)

    @property
    def identity(self) -> str:
        return self.holder or default_holder()


def monitor_tick(
    store: SchedulerStore,
    now: datetime | None = None,
    *,
    settings: MonitorSettings | None = None,
    app: Celery | None = None,
    workers: LiveWorkers | None = None,
    apply: ApplyOutcome | None = None,
    ping_timeout: timedelta | None = None,
    grace: timedelta | None = None,
    index: IndexKeeper | None = None,
) -> MonitorReport:
    """One pass over the monitor's duties (see the module doc), if this
    process holds (or can take) the monitor's lock.

    ``now`` is the caller's clock (default: the system's). ``apply`` is the
    policy's outcome (the listener's :func:`outcome_applier` when ``None``),
    so a run lost here updates its task exactly as a ``lost`` event would.
    Without ``app`` nothing is re-published; without ``index`` (the Redis
    index's keeper) no stuck index claim is returned. ``ping_timeout`` /
    ``grace`` override those of ``settings`` (a shorthand for the steal
    step alone)."""
    settings = settings or MonitorSettings()
    if ping_timeout is not None or grace is not None:
        settings = replace(
            settings,
            ping_timeout=ping_timeout or settings.ping_timeout,
            grace=grace or settings.grace,
        )
    now = now or datetime.now(tz=UTC)
    holder = settings.identity
    lock = store.acquire_lock(MONITOR_LOCK, holder=holder, ttl=settings.lock_ttl)
    if not lock.held:
        logger.debug("not the monitor: the lock is held by %s", lock.holder)
        return MonitorReport(
            now=now, lock=lock, steal=_no_steal(lock.db_now), skipped=NOT_THE_MONITOR
        )
    publish_terms(store, settings.ping_timeout, settings.grace, holder)  # workers' bound
    if apply is None:
        apply = outcome_applier(TaskTypeCache(store), random.Random())
    batch = settings.batch_size
    steal = store.steal_expired_leases(
        ping_timeout=settings.ping_timeout, grace=settings.grace, apply=apply, limit=batch
    )
    if steal.warned:
        logger.warning(
            "%d run(s) not renewed by their copy for %s: put on notice",
            len(steal.warned),
            settings.ping_timeout,
        )
    for run in steal.stolen:
        logger.warning(
            "run %s of task %s lost: taken from its copy on %s (no sign of life for %s + %s)",
            run.backend_id,
            run.task_id,
            run.worker,
            settings.ping_timeout,
            settings.grace,
        )
    offline = store.sweep_silent_workers(
        now=now,
        timeout=settings.worker_timeout,
        offline_grace=settings.offline_grace,
        apply=apply,
        limit=batch,
    )
    for hostname in offline.marked_offline:
        logger.warning("worker %s sent no heartbeat in time: marked offline", hostname)
    for run in offline.lost:
        logger.warning(
            "run %s of task %s lost: its worker %s is offline",
            run.backend_id,
            run.task_id,
            run.worker,
        )
    expired = store.expire_oneshot_tasks(now=now, grace=settings.oneshot_expiry_grace, limit=batch)
    for expiry in expired:
        logger.warning("one-shot task %s %s", expiry.task.id, expiry.run.error)
    runs_deleted = store.delete_old_runs(
        ended_before=now - settings.keep_runs, limit=settings.retention_limit
    )
    store.delete_old_batches(
        claimed_before=now - settings.keep_runs, limit=settings.retention_limit
    )
    oneshots_deleted = store.delete_finished_oneshot_tasks(
        updated_before=now - settings.keep_finished_oneshots, limit=settings.retention_limit
    )
    if runs_deleted or oneshots_deleted:
        logger.info(
            "retention: deleted %d run(s) ended before %s and %d finished one-shot task(s)",
            runs_deleted,
            (now - settings.keep_runs).isoformat(),
            oneshots_deleted,
        )
    republished = 0
    if app is not None:
        republished = republish_unstarted(
            store,
            app,
            now,
            older_than=settings.republish_after,
            orphaned_after=settings.orphaned_after,
            workers=workers,
            limit=batch,
        )
    loads = measure_loads(store, now, settings)
    # the census may take a while: the lock is renewed first, so that the
    # duties' share of the pass and the census's do not add up against it
    census = Refresh(skipped="fresh")
    fresh_for = census_fresh_for(store, settings, now)
    if fresh_for is not None:
        census = Refresh(skipped="the monitor's lock was lost during the pass")
        if store.acquire_lock(MONITOR_LOCK, holder=holder, ttl=settings.lock_ttl).held:
            census = census_step(store, now, settings, fresh_for)
    unstuck = 0
    if index is not None:
        for task_type in store.get_task_types():
            unstuck += index.return_stuck(task_type.type, now=now)
    report = MonitorReport(
        now=now,
        lock=lock,
        steal=steal,
        offline=offline,
        expired=tuple(expired),
        runs_deleted=runs_deleted,
        oneshots_deleted=oneshots_deleted,
        republished=republished,
        index_unstuck=unstuck,
        loads_measured=loads,
        census_assessed=census.assessed,
        census_at=None if census.census is None else census.census.at,
    )
    logger.info("monitor pass: %s", report.summary())
    return report


def measure_loads(store: SchedulerStore, now: datetime, settings: MonitorSettings) -> int:
    """Measure every task type's load when the last measurement is at least
    ``load_every`` old (or missing): the number of types measured (0: not due)."""
    measured = [t.load_measured_at for t in store.get_task_types()]
    if not measured:
        return 0
    if all(at is not None and now - at < settings.load_every for at in measured):
        return 0
    loads = store.measure_type_loads(
        now=now, window=settings.load_window, slack=settings.load_slack
    )
    for name, load in sorted(loads.items()):
        if load.demand or load.delivered:
            pressure = load.pressure
            logger.info(
                "load of %s: demand %.3f, delivered %.3f worker(s)%s, %d overdue",
                name,
                load.demand,
                load.delivered,
                f" (pressure {pressure:.2f})" if pressure is not None else "",
                load.backlog,
            )
    return len(loads)


def census_fresh_for(
    store: SchedulerStore, settings: MonitorSettings, now: datetime | None = None
) -> timedelta | None:
    """How old the stored census may be: five times what it cost, within
    [max(``period``, 10 s), ``census_every``]; ``None`` when the latest
    one is younger than that (nothing to do this pass: one read)."""
    latest = store.latest_census()
    if latest is None:
        return _ZERO
    cost = timedelta(seconds=5 * latest.took)
    fresh_for = min(settings.census_every, max(settings.period, cost, CENSUS_FLOOR))
    age = (now or datetime.now(tz=UTC)) - latest.at
    return None if _ZERO <= age < fresh_for else fresh_for


def census_step(
    store: SchedulerStore, now: datetime, settings: MonitorSettings, fresh_for: timedelta
) -> Refresh:
    """The census step (:func:`~..health.census.refresh`) for a census
    older than ``fresh_for``, within the pass's budget."""
    return refresh(
        store,
        now,
        holder=f"monitor:{settings.identity}",
        fresh_for=fresh_for,
        budget=settings.census_seconds,
    )


def _no_steal(db_now: datetime) -> StealReport:
    return StealReport(db_now=db_now)


def release(store: SchedulerStore, settings: MonitorSettings) -> None:
    """Give the monitor's lock up now (another process takes over at its
    next pass instead of after ``lock_ttl``). Errors are logged only."""
    try:
        if store.release_lock(MONITOR_LOCK, holder=settings.identity):
            logger.info("monitor lock released")
    except Exception as error:  # the database may be down: the TTL frees it
        logger.warning("could not release the monitor lock: %s", error)


def monitor_loop(
    store: SchedulerStore,
    settings: MonitorSettings,
    *,
    stop: threading.Event | None = None,
    once: bool = False,
    app: Celery | None = None,
    workers: LiveWorkers | None = None,
    index: IndexKeeper | None = None,
    clock: Callable[[], datetime] | None = None,
) -> MonitorReport | None:
    """Run :func:`monitor_tick` every ``settings.period`` until ``stop`` is
    set (or once), then release the lock. Store errors are logged and the
    next pass tries again (with ``once`` they are raised). Returns the last
    pass's report. ``clock``: the passes' ``now`` (a daemon's: the
    database's clock, :class:`~..store.clock.DatabaseClock`)."""
    stop = stop or threading.Event()
    apply = outcome_applier(TaskTypeCache(store), random.Random())
    last: MonitorReport | None = None
    outage = Outage(logger, "monitor pass")
    try:
        while True:
            try:
                last = monitor_tick(
                    store,
                    clock() if clock is not None else None,
                    settings=settings,
                    app=app,
                    workers=workers,
                    apply=apply,
                    index=index,
                )
            except SchedulerError as error:  # the database is down: one line per outage
                if once:
                    raise
                outage.failed(error)
            except Exception:  # a bug: its traceback, and the loop goes on
                if once:
                    raise
                logger.exception("monitor pass failed; trying again in %s", settings.period)
            else:
                outage.ok()
            if once or stop.wait(settings.period.total_seconds()):
                return last
    finally:
        release(store, settings)
