"""One runner pass: turn ready task rows into Celery messages.

For each task type: capacity = ``max_queue_length`` - the broker queue's
current depth; claim up to that many ready tasks in priority-then-deadline
order (their runs are created in the same transaction); publish them with
the run's ``backend_id`` as Celery task id. A pass never claims for a queue
whose depth it could not read, so a broker outage leaves tasks waiting
rather than claimed. Each claim's runs form a dispatch batch, marked
published once its messages are sent: if the runner dies or publishing
fails in between, the runs stay ``scheduled`` in an unpublished batch and
the monitor publishes them with the same ids within seconds
(:mod:`.republish`). A type whose claims took fewer tasks than it had room
for records that room, per class, at the instant the pass began, for
each class in which it left no ready task behind (:mod:`.room`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from celery import Celery

from ..broker import BrokerError, Message, PublishError
from ..broker.connection import open_connection
from ..broker.message import time_limits
from ..broker.port import CeleryBroker, QueuePort
from ..domain.enums import LONG_RUN
from ..domain.exceptions import SchedulerError, StatementTimeout
from ..domain.model import RUNNER_ORDER, Claimed, DispatchOrder, Priority, TaskType
from ..plumbing.quietlog import QuietLog
from ..store import SchedulerStore
from . import metrics, reserve
from .passes import PassReport, TypePass
from .pauses import not_paused as _not_paused
from .pools import PassPools, pass_pools
from .reserve import Slots
from .room import record_room
from .routing import LiveWorkers

if TYPE_CHECKING:
    from ..index.keeper import IndexKeeper

logger = logging.getLogger(__name__)
#: failures that repeat pass after pass during an outage: one line a minute per kind
_quiet = QuietLog(logger, logging.ERROR)

#: Tasks claimed (and published) per transaction: small enough that a crash
#: between claim and publish leaves few runs to re-publish (at most two
#: rounds of chunks), large enough to amortise round trips and thread
#: hand-overs (5,000 rather than 2,000: +10 % tasks/s, measured on
#: PostgreSQL + Redis).
CLAIM_CHUNK = 5000
#: Claims run at once on a store whose concurrent claims skip each other's
#: rows (``capabilities.skip_locked``: PostgreSQL): a claim is mostly
#: database time in one backend, so a second one uses another core.
CLAIMERS = 2
#: Capacity of a type without ``max_queue_length``, per pass.
UNBOUNDED_PASS_LIMIT = 10_000


def message_for(
    claimed: Claimed,
    task_type: TaskType,
    workers: LiveWorkers | None = None,
    limits: tuple[float | None, float | None] | None = None,
) -> Message:
    """The Celery message of a claimed task: to its type's queue, or, for a
    task with banned nodes, to the own queue of an allowed live worker."""
    queue = task_type.effective_queue
    if claimed.dont_run_on_nodes:
        hostname = workers.pick(queue, claimed.dont_run_on_nodes) if workers else None
        if hostname is None:  # the claim only takes such tasks when one is alive
            raise RuntimeError(f"no allowed worker for task {claimed.task_id}")
        queue = workers.direct_queue(hostname) if workers else queue
    args, kwargs = claimed.call_arguments()
    return Message(
        task_id=claimed.backend_id,
        task_name=task_type.backend_name,
        queue=queue,
        args=args,
        kwargs=kwargs,
        time_limits=time_limits(task_type) if limits is None else limits,
    )


def capacity_of(task_type: TaskType, depth: int) -> int:
    if task_type.max_queue_length is None:
        return UNBOUNDED_PASS_LIMIT
    return max(0, task_type.max_queue_length - depth)


def tick(
    store: SchedulerStore,
    app: Celery | None,
    now: datetime,
    *,
    types: Sequence[str] | None = None,
    priorities: Sequence[Priority] | None = None,
    connection: Any = None,
    workers: LiveWorkers | None = None,
    claimers: int = CLAIMERS,
    order: DispatchOrder = RUNNER_ORDER,
    broker: QueuePort | None = None,
    clock: Callable[[], float] = time.monotonic,
    index: IndexKeeper | None = None,
    pools: PassPools | None = None,
    slots: Slots | None = None,
) -> PassReport:
    """One pass over the task types named in ``types`` (default: all).

    Types with no ready task are skipped without touching the broker, so an
    idle pass costs one indexed query per type. Paused types
    (:meth:`~SchedulerStore.pause_task_type`) are skipped before anything
    else: not due, no broker, no index, no room recorded. Without ``workers`` (the live
    workers, for routing), tasks with ``dont_run_on_nodes`` are left waiting.
    ``claimers`` claims run at once where the store allows it (see
    :data:`CLAIMERS`); ``order`` is the order of the ready tasks within a
    priority class (:class:`DispatchOrder`).

    The queues are ``app``'s broker's, over ``connection`` (one is opened
    for the pass without it), or those of ``broker`` when given (``app`` is
    then not used). ``clock`` (monotonic seconds) moves ``now`` on during
    the pass: each claim is stamped with ``now`` plus the time the pass has
    taken so far. With ``index`` (the Redis index, deadline order only), the
    ids to claim come from the index and are claimed in the database by id;
    a round the index cannot fill is completed from the database. ``pools``:
    the runner's threads (:mod:`.pools`; without them the pass opens its own).
    ``slots``: the worker slots of a queue, when known: long runs are kept
    from some of them while shorter tasks fall due (:mod:`.reserve`)."""
    registered = store.get_task_types()
    task_types = [t for t in registered if types is None or t.type in types]
    if types is not None:
        for name in sorted(set(types) - {t.type for t in task_types}):
            logger.warning("task type %s is not registered; it is skipped", name)
    task_types = _not_paused(task_types)
    upcoming = {t.type: store.next_ready_time(t.type, priorities=priorities) for t in task_types}
    due = [t for t in task_types if (ready := upcoming[t.type]) is not None and ready <= now]
    later = [ready for ready in upcoming.values() if ready is not None and ready > now]
    if not due:
        return PassReport(now=now, next_ready=min(later, default=None))
    due = skip_missed(store, due, now)
    with pass_pools(pools, claimers) as threads:

        def serve(queues: QueuePort) -> PassReport:
            options = (claimers, order, clock, index, slots, by_queue(registered))
            context = _Pass(store, queues, now, priorities, workers, threads, *options)
            return _serve(context, due, later)

        if broker is not None:
            return serve(broker)
        if app is None:
            raise ValueError("a pass needs a Celery app or a broker")
        # one broker connection for the whole pass (depths, then every chunk)
        owned = open_connection(app) if connection is None else None
        try:
            return serve(CeleryBroker(app, connection or owned))
        finally:
            if owned is not None:
                owned.release()


def by_queue(task_types: Sequence[TaskType]) -> dict[str, tuple[TaskType, ...]]:
    """``task_types`` routed to each queue (every registered type, served
    by this runner or not: a worker of the queue runs them all)."""
    queues: dict[str, list[TaskType]] = {}
    for task_type in task_types:
        queues.setdefault(task_type.effective_queue, []).append(task_type)
    return {queue: tuple(types) for queue, types in queues.items()}


#: missed firings dropped per type and call (calls repeat while one is full)
SKIP_BATCH = 1000


def skip_missed(store: SchedulerStore, due: list[TaskType], now: datetime) -> list[TaskType]:
    """Drop the missed firings of ``due`` types' tasks whose catch-up policy
    is ``skip`` (:meth:`SchedulerStore.skip_missed_firings`), before any
    claim of the pass and at the pass's ``now``: a firing dropped is never
    dispatched. A type whose firings could not be checked is not served
    this pass (its late tasks would run when they should be dropped)."""
    served: list[TaskType] = []
    for task_type in due:
        try:
            while True:
                skips = store.skip_missed_firings(task_type.type, now=now, limit=SKIP_BATCH)
                for skip in skips:
                    metrics.SKIPPED.labels(task_type=task_type.type).inc()
                    logger.info("task %s: %s", skip.task.id, skip.run.error)
                if len(skips) < SKIP_BATCH:
                    break
        except SchedulerError as error:
            metrics.PASS_ERRORS.labels(stage="skip").inc()
            _quiet.log(
                "cannot drop the missed firings of %s; not served this pass: %s",
                task_type.type,
                error,
                key=("skip", task_type.type),
            )
            continue
        _quiet.ok(("skip", task_type.type))
        served.append(task_type)
    return served


def _serve(context: _Pass, due: list[TaskType], later: list[datetime]) -> PassReport:
    store, now, priorities = context.store, context.now, context.priorities
    queues = sorted({t.effective_queue for t in due})
    try:
        depths = context.broker.depths(queues)
    except BrokerError as error:
        _quiet.log("cannot read queue depths; nothing is claimed this pass: %s", error, key="depth")
        metrics.PASS_ERRORS.labels(stage="depth").inc()
        failed = tuple(TypePass(t.type, t.effective_queue, None, 0, error=str(error)) for t in due)
        return PassReport(now=now, types=failed, errors=(str(error),), saturated=True)
    _quiet.ok("depth")
    if context.workers is not None:
        context.workers.refresh()
    reports = [_serve_type(context, t, depths[t.effective_queue]) for t in due]
    errors = tuple(r.error for r in reports if r.error)
    saturated = any(r.error or r.claimed >= r.capacity for r in reports)
    remaining: list[datetime] = []
    held = False
    for task_type, report in zip(due, reports, strict=True):
        ready = store.next_ready_time(task_type.type, priorities=priorities)
        room = report.error is None and report.claimed < report.capacity
        if ready is not None and ready <= now and report.reserved:
            # long tasks kept waiting: again once a slot may have freed
            metrics.LONG_RUNS_KEPT_WAITING.labels(task_type=task_type.type).inc()
            remaining.append(now + reserve.RECHECK)
        elif ready is not None and ready <= now and room:
            held = True  # ready, room, yet not claimed: locked by another transaction
        elif ready is not None:
            remaining.append(ready)
    return PassReport(
        now=now,
        types=tuple(reports),
        next_ready=min([*later, *remaining], default=None),
        saturated=saturated,
        errors=errors,
        held=held,
    )


@dataclass(frozen=True)
class _Pass:
    store: SchedulerStore
    broker: QueuePort
    now: datetime
    priorities: Sequence[Priority] | None
    workers: LiveWorkers | None
    pools: PassPools
    claimers: int = CLAIMERS
    order: DispatchOrder = RUNNER_ORDER
    #: monotonic seconds
    clock: Callable[[], float] = time.monotonic
    #: the Redis index, when the runner uses one
    index: IndexKeeper | None = None
    #: the worker slots of a queue, when known (:mod:`.reserve`)
    slots: Slots | None = None
    #: the registered types routed to each queue, whose runs share its
    #: slots (:mod:`.reserve`)
    sharing: Mapping[str, tuple[TaskType, ...]] = field(default_factory=dict)
    #: the clock when the pass began
    began: float = field(default=0.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "began", self.clock())

    def at(self) -> datetime:
        """The pass's ``now`` moved on by the time the pass has taken so
        far: a chunk claimed late in a long pass is stamped (its runs'
        ``scheduled``, from which re-publishing waits) when it is claimed,
        seconds before it is published, not when the pass began."""
        return self.now + timedelta(seconds=self.clock() - self.began)


class ChunkSizes:
    """How many tasks one claim of each type takes, in this process.

    :data:`CLAIM_CHUNK` at first; a claim cancelled for its time limit
    (:class:`StatementTimeout`) halves its type's size (down to
    :data:`MIN_CHUNK`), and each full claim doubles it back towards
    :data:`CLAIM_CHUNK`: a database that struggles gets smaller claims that
    finish, instead of the same claim failing pass after pass."""

    def __init__(self) -> None:
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, task_type: str) -> int:
        with self._lock:
            return self._sizes.get(task_type, CLAIM_CHUNK)

    def shrink(self, task_type: str) -> int:
        with self._lock:
            size = max(MIN_CHUNK, self._sizes.get(task_type, CLAIM_CHUNK) // 2)
            self._sizes[task_type] = size
            return size

    def grow(self, task_type: str) -> None:
        with self._lock:
            size = self._sizes.get(task_type)
            if size is not None:
                self._sizes[task_type] = min(CLAIM_CHUNK, size * 2)


#: the smallest claim a timed-out type falls back to
MIN_CHUNK = 100
#: this process's claim sizes
CHUNKS = ChunkSizes()


def _serve_type(context: _Pass, task_type: TaskType, depth: int) -> TypePass:
    started = time.perf_counter()
    capacity = capacity_of(task_type, depth)
    if context.index is not None:
        context.index.return_stuck(task_type.type, now=context.now)
        context.index.sweep(task_type.type)
    claimers = context.claimers if context.store.capabilities.skip_locked else 1
    serving = _Serving(context, task_type, context.pools.publisher, context.pools.claims)
    if capacity > 0:
        sharing = context.sharing.get(task_type.effective_queue, ())
        room = reserve.room_for_long(context.store, task_type, context.slots, context.now, sharing)
        serving.keep_slots(room.long_room, room.long_run)
    claimed, published, error = serving.run(capacity, claimers)
    if error is None and claimed < capacity and task_type.paused_at is None:
        # the pass's now is when it began: before any of its claims
        record_room(
            context.store,
            task_type,
            began=context.now,
            priorities=context.priorities,
            nodes=serving.nodes,
            # rows skipped as locked, tasks kept from long runs, or rounds
            # filled from the index: ask the store what was left
            may_leave=context.store.capabilities.skip_locked
            or serving.kept_long
            or context.index is not None,
        )
    seconds = time.perf_counter() - started
    report = TypePass(
        task_type.type,
        task_type.effective_queue,
        depth,
        capacity,
        claimed,
        published,
        seconds,
        error,
        task_type.max_queue_length,
        serving.short_only and claimed < capacity,
    )
    metrics.record_type_pass(task_type.type, depth, claimed, published, seconds)
    if error:
        _quiet.log("%s", report.describe(), key=("type", task_type.type))
    else:
        _quiet.ok(("type", task_type.type))
        logger.info("%s", report.describe())
    return report


class _Serving:
    """Claims and publishes the ready tasks of one type, up to a capacity.

    Claiming (database time) and publishing (Python and broker time)
    overlap: the chunks of round k are published by one thread, in dispatch
    order, while round k+1 is claimed; each chunk is handed to that thread
    as soon as it and the chunks before it are claimed (the first chunk of
    a round need not wait for the others). A round is one claim of up to
    :data:`CLAIM_CHUNK` tasks or, with several claimers, the ids of the
    next ``claimers`` chunks read at once and claimed by that many
    concurrent transactions (each its own chunk, in order). A failure stops
    the pass; at most two rounds of runs then stay scheduled without a
    message, for the monitor to publish (:mod:`.republish`)."""

    def __init__(
        self,
        context: _Pass,
        task_type: TaskType,
        publisher: ThreadPoolExecutor,
        pool: ThreadPoolExecutor,
    ) -> None:
        self.context = context
        self.task_type = task_type
        self.publisher = publisher
        self.pool = pool
        self.nodes = context.workers.nodes(task_type.effective_queue) if context.workers else None
        self.in_flight: list[Future[int]] = []
        self.published = 0
        self.error: str | None = None
        self.publish_failed = False
        self.chunk = CHUNKS.get(task_type.type)
        #: how many long runs the first round may take (None: no limit)
        self.long_room: int | None = None
        #: what is long this pass (:mod:`.reserve`)
        self.long_run = LONG_RUN
        #: the claims leave long tasks waiting (:mod:`.reserve`)
        self.short_only = False
        #: a round was claimed so (ready long tasks may have been left)
        self.kept_long = False

    def keep_slots(self, long_room: int | None, long_run: timedelta = LONG_RUN) -> None:
        """Let the pass take at most ``long_room`` runs expected to last
        ``long_run`` or more (``None``: no limit): its first round takes
        that many tasks in dispatch order, long or not; the rounds after it,
        and every round when there is no room left, take no long run."""
        self.long_room = long_room
        self.long_run = long_run
        self.short_only = long_room == 0

    def run(self, capacity: int, claimers: int) -> tuple[int, int, str | None]:
        """``(claimed, published, first error)``."""
        claimed = 0
        while claimed < capacity:
            want = min(self.chunk * claimers, capacity - claimed)
            if self.long_room is not None and not self.short_only:
                want = min(want, self.long_room)
            # the round before is still being published meanwhile
            earlier, self.in_flight = self.in_flight, []
            self.kept_long = self.kept_long or self.short_only
            batches, complete = self._claim_round(want, claimers)
            claimed += sum(len(batch) for batch in batches)
            if self.long_room is not None:
                self.short_only = True
            self._collect(earlier)
            if not complete or self.error is not None:
                break
        self._collect(self.in_flight)
        return claimed, self.published, self.error

    def _hand_over(self, batch: list[Claimed]) -> None:
        """Publish ``batch`` (claimed) after the chunks handed over before it."""
        if batch:
            future = self.publisher.submit(self._publish, batch)
            self.in_flight.append(future)

    def _publish(self, batch: list[Claimed]) -> int:
        # the chunks claimed are published even if another claim failed; not
        # once the broker has failed (an earlier chunk: same thread, in order)
        if self.publish_failed:
            return 0
        try:
            return _publish(self.context, self.task_type, batch)
        except PublishError:
            self.publish_failed = True
            raise

    def _claim_round(self, want: int, claimers: int) -> tuple[list[list[Claimed]], bool]:
        """The batches of one round, in dispatch order (each handed over for
        publishing once claimed), and whether the round was full (more
        tasks may be ready)."""
        if self.context.index is not None and self.context.order is DispatchOrder.DEADLINE:
            indexed = self._index_round(self.context.index, want)
            if indexed is not None:
                return indexed
        if claimers == 1:
            batch = self._claim(min(want, self.chunk), None)
            self._hand_over(batch)
            return [batch], len(batch) == min(want, self.chunk)
        context = self.context
        try:
            ids = context.store.ready_task_ids(
                self.task_type.type,
                now=context.at(),
                limit=want,
                priorities=context.priorities,
                nodes=self.nodes,
                order=context.order,
                short_only=self.short_only,
                long_run=self.long_run,
            )
        except SchedulerError as exc:
            self._claim_failed(exc, want)
            return [], False
        batches = self._claim_ids(ids)
        # like a single claim: stop when fewer tasks than asked were taken
        # (none left, or another runner took some: the next pass goes on)
        return batches, len(ids) == want and sum(map(len, batches)) == want

    def _index_round(
        self, index: IndexKeeper, want: int
    ) -> tuple[list[list[Claimed]], bool] | None:
        """A round whose ids come from the index (``None``: claim from the
        database instead). The database claims them by id and refuses those
        it no longer holds ready (they are filed again, never dispatched);
        when it took fewer than ``want`` (the index had fewer, or offered
        tasks the database refused), the database is asked for the rest,
        which catches any ready task the index lacks."""
        context = self.context
        ids = index.claim(
            self.task_type.type,
            now=context.at(),
            limit=want,
            priorities=context.priorities,
            nodes=self.nodes,
        )
        if ids is None:
            return None
        batches = self._claim_ids(ids)
        taken = {c.task_id for batch in batches for c in batch}
        index.settle(self.task_type.type, ids, taken, now=context.at())
        if self.error is not None:
            return batches, False
        if len(taken) < want:
            rest = min(want - len(taken), self.chunk)
            extra = self._claim(rest, None)
            self._hand_over(extra)
            batches.append(extra)
            return batches, len(extra) == rest
        return batches, True

    def _claim_ids(self, ids: list[int]) -> list[list[Claimed]]:
        """Claim ``ids`` (at most ``claimers`` chunks of them), a chunk per
        transaction, at once; the batches in the order of the ids, each
        handed over for publishing once it and those before it are claimed."""
        slices = [ids[i : i + self.chunk] for i in range(0, len(ids), self.chunk)]
        others = [self.pool.submit(self._claim, len(s), s) for s in slices[1:]]
        batches = [self._claim(len(slices[0]), slices[0])] if slices else []
        self._hand_over(batches[0] if batches else [])
        for future in others:
            batches.append(future.result())
            self._hand_over(batches[-1])
        return batches

    def _claim(self, limit: int, among: list[int] | None) -> list[Claimed]:
        context = self.context
        try:
            claimed = context.store.claim_ready_tasks(
                self.task_type.type,
                now=context.at(),
                limit=limit,
                priorities=context.priorities,
                nodes=self.nodes,
                among=among,
                order=context.order,
                short_only=self.short_only,
                long_run=self.long_run,
            )
            if len(claimed) == self.chunk:
                CHUNKS.grow(self.task_type.type)
            return claimed
        except SchedulerError as exc:
            self._claim_failed(exc, limit)
            return []

    def _claim_failed(self, exc: SchedulerError, limit: int) -> None:
        """A claim (or the read of the ids to claim) of ``limit`` tasks failed;
        one cancelled for its time limit makes the type's next claims smaller."""
        if isinstance(exc, StatementTimeout):
            smaller = CHUNKS.shrink(self.task_type.type)
            logger.warning(
                "a claim of %d %s tasks ran out of time; claiming %d at a time from now on",
                limit,
                self.task_type.type,
                smaller,
            )
        self._fail("claim", f"claim failed: {exc}")

    def _collect(self, futures: list[Future[int]]) -> None:
        """Wait for ``futures`` (chunks being published)."""
        for future in futures:
            try:
                self.published += future.result()
            except PublishError as exc:
                self.published += exc.published
                self._fail("publish", f"publish failed; runs stay scheduled: {exc}")

    def _fail(self, stage: str, error: str) -> None:
        metrics.PASS_ERRORS.labels(stage=stage).inc()
        if self.error is None:
            self.error = error


def _publish(context: _Pass, task_type: TaskType, batch: list[Claimed]) -> int:
    """Publish a claim's messages, then record its dispatch batch published
    (until then its runs are orphans that the monitor publishes)."""
    limits = time_limits(task_type)
    messages = [message_for(c, task_type, context.workers, limits) for c in batch]
    published = context.broker.publish(messages)
    batches = {c.batch for c in batch if c.batch is not None}
    try:
        context.store.mark_published(batches, at=context.at())
    except SchedulerError as error:
        # the messages are out: their runs are taken for orphans and sent
        # again later, a copy the start guard refuses
        metrics.PASS_ERRORS.labels(stage="database").inc()
        _quiet.log("could not record %d published runs: %s", published, error, key="published")
    return published
