"""The one store interface that every daemon and face of the scheduler uses.

Implementations: :class:`~swh_like_scheduler.store.sql.SQLAlchemyStore`
(PostgreSQL and SQLite). The same contract test suite runs against each.
All datetimes given to or returned by a store are timezone-aware UTC.
Errors are :mod:`swh_like_scheduler.exceptions`, never driver exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..model import (
    Claimed,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
)

if TYPE_CHECKING:
    from ..jobs import Job, JobView
    from ..lease.protocol import LeaseGrant, PingReply, StealReport
    from ..monitor.records import Expiry, LockState, WorkerSighting, WorkerState, WorkerSweep

#: Given the task (as locked in the store) and its just-ended run, the task's
#: new state. Pure; called inside the store's transaction.
ApplyOutcome = Callable[[Task, TaskRun], Task]


@dataclass(frozen=True)
class RunEnd:
    """One run end for :meth:`SchedulerStore.end_task_runs` (the arguments
    of :meth:`SchedulerStore.end_task_run`)."""

    backend_id: str
    status: RunStatus
    ended: datetime
    result: Any = None
    error: str | None = None


@dataclass(frozen=True)
class TaskFilter:
    """Criteria of :meth:`SchedulerStore.search_tasks`; ``None`` matches all."""

    type: str | None = None
    status: Sequence[TaskStatus] | None = None
    priority: Priority | None = None
    schedule_kind: ScheduleKind | None = None
    key_prefix: str | None = None
    next_run_before: datetime | None = None


#: PostgreSQL notification channel on which writers announce task types that
#: may have new ready tasks (payload: the type name).
READY_CHANNEL = "swh_scheduler_ready"

#: The filter that matches every task.
ALL_TASKS = TaskFilter()


@dataclass(frozen=True)
class ImportSummary:
    """What :meth:`SchedulerStore.import_tasks` did."""

    created: int
    existing: int


@dataclass(frozen=True)
class ScheduleHealth:
    """What :meth:`SchedulerStore.schedule_health` read: the figures of the
    ``/health`` and ``/metrics`` endpoints."""

    now: datetime
    #: tasks per ``(type, status)``
    tasks: dict[tuple[str, str], int]
    #: per type with waiting tasks past their deadline (should_start_by):
    #: the earliest such deadline
    oldest_overdue: dict[str, datetime]
    #: open runs (``scheduled``, ``started``) per ``(type, run status)``
    open_runs: dict[tuple[str, str], int]
    #: when the latest dispatch batch was claimed (a runner's last claim)
    last_claim_at: datetime | None
    #: the latest sign of life of a worker recorded by the listener
    last_worker_seen_at: datetime | None


@dataclass(frozen=True)
class Capabilities:
    """What a database engine can do, where PostgreSQL and SQLite differ."""

    #: ``SELECT … FOR UPDATE SKIP LOCKED``: several runners may claim concurrently.
    skip_locked: bool
    #: Several processes may write at once (SQLite: one writer at a time).
    concurrent_writers: bool
    #: Ids come from a sequence that concurrent transactions share safely;
    #: without one, ids are taken above the current maximum, which is safe
    #: only because the single writer holds the database lock.
    id_sequences: bool
    #: Writers announce new ready tasks on :data:`READY_CHANNEL` (LISTEN/NOTIFY).
    notifications: bool
    #: Data-modifying statements inside ``WITH``: a claim marks its tasks and
    #: inserts their runs in one statement (one round trip).
    writable_ctes: bool = False


@runtime_checkable
class SchedulerStore(Protocol):
    """Persistence of task types, tasks and their runs."""

    @property
    def capabilities(self) -> Capabilities:
        """The engine's capability flags."""
        ...

    def close(self) -> None:
        """Release connections this store opened itself (not a caller's engine)."""
        ...

    def transaction(self) -> AbstractContextManager[SchedulerStore]:
        """A view of the store whose calls share one transaction, committed
        when the ``with`` block ends and rolled back if it raises (e.g. the
        listener records a batch of run events with one commit)."""
        ...

    # -- task types ---------------------------------------------------------

    def create_task_type(self, task_type: TaskType) -> TaskType:
        """Register a new task type.

        Raises :class:`DuplicateTaskType` if one of that name exists; nothing
        is written then.
        """
        ...

    def get_task_type(self, name: str) -> TaskType | None:
        """The task type called ``name``, or ``None``."""
        ...

    def get_task_types(self) -> list[TaskType]:
        """Every task type, ordered by name."""
        ...

    def update_task_type(self, name: str, **changes: Any) -> TaskType:
        """Change fields of a task type (not its name) and return it.

        The result is validated as a whole before anything is written.
        Raises :class:`NotFound` for an unknown type.
        """
        ...

    # -- tasks --------------------------------------------------------------

    def create_tasks(self, tasks: Iterable[Task], *, now: datetime) -> list[Task]:
        """Create tasks atomically and return them in the order given.

        A task whose arguments take more than the store's
        ``max_argument_bytes`` of canonical JSON is refused
        (:class:`InvalidInput` ``arguments``) and nothing is written.

        Each task must have ``id=None``; its ``next_run`` and ``deadline`` are
        stored as given. Creation is idempotent:

        - a task with a client ``key`` already used returns the existing task
          if its definition (type, arguments, schedule, priority, constraints)
          is the same, and raises :class:`KeyConflict` otherwise — also for a
          one-shot task at another instant than the stored one, which has not
          run yet (to move it: :meth:`respawn_tasks`, or a job's
          :meth:`put_job`);
        - a task without a key that is identical (same type, arguments,
          schedule kind and priority) to a *live* task (waiting or scheduled)
          returns that task instead of creating a second one — also when the
          same batch holds it twice.

        Unknown task types raise :class:`UnknownTaskType`. On any error,
        nothing of the batch is written.
        """
        ...

    def import_tasks(
        self,
        tasks: Iterable[Task],
        *,
        now: datetime,
        batch_size: int = 1000,
        progress: Callable[[int, int], None] | None = None,
    ) -> ImportSummary:
        """Create a stream of tasks (millions) in one transaction, reading
        ``batch_size`` at a time, with the idempotence rules of
        :meth:`create_tasks`. ``progress(created, existing)`` is called after
        each batch. An error raised by the stream or the database (a bad line
        of an input file, a key conflict) rolls everything back: the import
        is written whole or not at all."""
        ...

    def get_tasks(self, ids: Sequence[int]) -> list[Task]:
        """The tasks with these ids, in the order given; unknown ids are left out."""
        ...

    def get_task_by_key(self, key: str) -> Task | None:
        """The task created with client key ``key``, or ``None``."""
        ...

    def search_tasks(
        self, criteria: TaskFilter = ALL_TASKS, *, after_id: int = 0, limit: int = 100
    ) -> list[Task]:
        """Tasks matching ``criteria`` with ``id > after_id``, by increasing id.

        Page by passing the last id of a page as ``after_id`` of the next
        (keyset paging: stable and cheap however deep the page).
        """
        ...

    def count_tasks(self, criteria: TaskFilter = ALL_TASKS) -> int:
        """How many tasks match ``criteria``."""
        ...

    def next_ready_time(
        self, task_type: str, *, priorities: Sequence[Priority] | None = None
    ) -> datetime | None:
        """The earliest ``next_run`` of the waiting tasks of ``task_type``
        (``None`` if there is none): when the runner has work again."""
        ...

    def list_pending(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int = 100,
        priorities: Sequence[Priority] | None = None,
    ) -> list[Task]:
        """Waiting tasks of ``task_type`` ready at ``now`` (``next_run <= now``)
        in dispatch order: priority class (high, normal, low), then earliest
        ``deadline``, then id. Reads only; :meth:`claim_ready_tasks` is the
        claiming counterpart and uses the same order."""
        ...

    def disable_tasks(self, ids: Sequence[int], *, now: datetime) -> list[Task]:
        """Take waiting or scheduled tasks out of scheduling (status
        ``disabled``); an open run is left to finish. Tasks in another status,
        and unknown ids, are left out of the result."""
        ...

    def enable_tasks(self, ids: Sequence[int], *, now: datetime) -> list[Task]:
        """Put disabled tasks back to ``waiting`` keeping their ``next_run``.

        Raises :class:`Conflict` if an identical live task exists meanwhile.
        """
        ...

    def cancel_tasks(self, ids: Sequence[int], *, now: datetime) -> list[Task]:
        """Cancel tasks (status ``cancelled``). Their runs that were dispatched
        but not started are ended as ``cancelled`` at ``now``; a started run
        is left running (its worker learns of the cancellation through its
        lease). Returns the tasks that were cancelled."""
        ...

    def respawn_tasks(self, ids: Sequence[int], *, next_run: datetime, now: datetime) -> list[Task]:
        """Make tasks runnable again at ``next_run`` with ``deadline =
        next_run`` (run as soon as allowed), whatever their status, except
        tasks with an open run, which are left out of the result.
        Retry counters are reset. Raises :class:`Conflict` if an identical
        live task exists."""
        ...

    def delete_tasks(self, ids: Sequence[int]) -> int:
        """Delete tasks and their runs; returns how many tasks were deleted."""
        ...

    def update_task(self, task: Task, *, expected_updated_at: datetime | None = None) -> Task:
        """Write every field of ``task`` (identified by its id) and return it.

        With ``expected_updated_at``, the write happens only if the stored
        task still has that ``updated_at`` (optimistic concurrency); otherwise
        :class:`Conflict` is raised. Raises :class:`NotFound` for an unknown id.
        """
        ...

    # -- dispatch -----------------------------------------------------------

    def claim_ready_tasks(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
        among: Sequence[int] | None = None,
    ) -> list[Claimed]:
        """Claim up to ``limit`` ready tasks of ``task_type`` for dispatch.

        ``nodes`` are the nodes of the live workers of the type's queue: a task
        with ``dont_run_on_nodes`` is claimed only if one of them is allowed,
        and never when ``nodes`` is ``None`` (unknown).

        With ``among`` (task ids, as :meth:`ready_task_ids` returns them),
        only those tasks are considered, in that order; those no longer
        ready, or being claimed by someone else, are skipped. Several claims
        can so share out the next tasks in dispatch order and run at once.

        Ready: status ``waiting`` and ``next_run <= now``. Order: priority
        class then ``deadline`` (as :meth:`list_pending`). In one transaction,
        each claimed task becomes ``scheduled`` and gets a run (status
        ``scheduled``, ``slot`` = its ``next_run``, ``backend_id`` derived
        from the task id and the slot, see :func:`run_backend_id`). The runs
        of one claim form a dispatch batch (:attr:`Claimed.batch`), to be
        marked published (:meth:`mark_published`) once their messages are
        sent.

        On PostgreSQL rows are locked ``FOR UPDATE SKIP LOCKED``: concurrent
        runners never claim the same task, and never wait on each other.
        SQLite serialises writers, so claims are still exclusive, but only one
        runner should be used (``capabilities.skip_locked`` is False).
        """
        ...

    def ready_task_ids(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
    ) -> list[int]:
        """The ids of the tasks :meth:`claim_ready_tasks` with the same
        arguments would claim now (up to ``limit``), in dispatch order.
        Reads only and locks nothing: another claim may take them first."""
        ...

    # -- runs ---------------------------------------------------------------

    def schedule_task_run(
        self, task_id: int, *, now: datetime, backend_id: str | None = None
    ) -> TaskRun:
        """Create the run of one waiting task for its current slot (whether
        or not it is due), marking the task ``scheduled``.

        Raises :class:`InvalidTransition` if the task is not waiting (for
        example it already has an open run), :class:`NotFound` if unknown.
        """
        ...

    def start_task_run(
        self, backend_id: str, *, started: datetime, worker: str | None = None
    ) -> TaskRun | None:
        """Mark a dispatched run as started. Idempotent: a run already started
        or ended is returned unchanged. ``None`` for an unknown backend id."""
        ...

    def start_task_runs(
        self, starts: Sequence[tuple[str, datetime, str | None]]
    ) -> dict[str, TaskRun]:
        """:meth:`start_task_run` for many ``(backend_id, started, worker)`` at
        once, in two statements; the first start of a backend id counts.
        Returns each known run as it is afterwards, by backend id (unknown
        ids are left out)."""
        ...

    def end_task_run(
        self,
        backend_id: str,
        *,
        status: RunStatus,
        ended: datetime,
        result: Any = None,
        error: str | None = None,
        apply: ApplyOutcome | None = None,
    ) -> TaskRun | None:
        """End an open run with a final ``status`` (not scheduled/started).

        With ``apply``, the run's task is locked and replaced by
        ``apply(task, ended_run)`` in the same transaction, so a run's end
        and its effect on the task are recorded together or not at all.
        Idempotent: a run that has already ended is returned unchanged and
        ``apply`` is not called. ``None`` for an unknown backend id.
        """
        ...

    def end_task_runs(
        self, ends: Sequence[RunEnd], *, apply: ApplyOutcome | None = None
    ) -> list[TaskRun | None]:
        """:meth:`end_task_run` for many runs in one transaction, as if called
        for each of ``ends`` in order (a second end of a run finds it ended; a
        task whose two runs end is given to ``apply`` as the first end left
        it), in a few statements. Returns, per end, its run afterwards
        (``None`` for an unknown backend id). Raises :class:`InvalidInput`,
        writing nothing, if a status is not final."""
        ...

    def mark_published(self, batches: Collection[int], *, at: datetime) -> None:
        """Record that the messages of these dispatch batches' runs
        (:attr:`Claimed.batch`) are on the broker, at ``at``. A runner calls
        it after publishing a claim's messages; until then the claim's runs
        are *orphans* for :meth:`reclaim_unstarted_runs`. Marking a batch
        twice keeps the first time."""
        ...

    # -- jobs by key (seed 004, :mod:`..jobs`) --------------------------------

    def put_job(self, job: Job, *, now: datetime) -> JobView:
        """Create the job ``job.key`` or replace its instants, in one
        transaction: instants given again are kept (one that already ran
        does not run again; one cancelled before is scheduled again; one not
        run yet takes the new callback, unless its message is already
        queued), new ones get a one-shot task, and those no longer given that
        have not run are cancelled. Raises :class:`InvalidInput`
        (``callback.type``) when the callback's task type is not registered;
        nothing is written then."""
        ...

    def get_job(self, key: str) -> JobView | None:
        """Every instant the job ever had, with its task and latest run; ``None``
        for an unknown key."""
        ...

    def delete_job(self, key: str, *, now: datetime) -> JobView | None:
        """Cancel the job's instants that have not run (one running goes on);
        ``None`` for an unknown key. The instants stay, as history."""
        ...

    def schedule_health(self, *, now: datetime, counts: bool = True) -> ScheduleHealth:
        """Figures that say whether the schedule keeps up, read with
        aggregate queries (no per-task computation): the oldest overdue
        waiting task per type, the last claim, the last worker sign of life
        and, with ``counts``, tasks per type and status and open runs (left
        empty without: those read whole tables)."""
        ...

    def unstarted_run_counts(self, *, task_types: Sequence[str] | None = None) -> dict[str, int]:
        """Per task type (of ``task_types``, default all), how many runs are
        ``scheduled`` with their message published (or from before dispatch
        batches): the messages that are in a queue, prefetched by a worker,
        or lost. Types with none are absent."""
        ...

    def reclaim_unstarted_runs(
        self,
        *,
        now: datetime,
        limit: int = 1000,
        published_before: datetime | None = None,
        claimed_before: datetime | None = None,
        task_types: Sequence[str] | None = None,
    ) -> list[tuple[str, Claimed]]:
        """Take runs that never started so that their message can be
        published again with the same id: with ``claimed_before``, runs whose
        dispatch batch was claimed before it and never marked published
        (orphans: no message was ever sent); with ``published_before``, runs
        whose message went out before it (it may be lost: broker data gone,
        purged queue), up to ``limit``, oldest first, of ``task_types``
        (default all).

        The runs taken form a new dispatch batch (:attr:`Claimed.batch`, to
        mark published once sent), get ``scheduled = now`` and a
        ``republished`` history entry in the same transaction; rows are
        locked ``SKIP LOCKED`` so several runners never take the same run.
        Runs of tasks that are no longer ``scheduled`` (cancelled, disabled)
        are left alone. Returns ``(task type, claim)`` pairs, oldest first."""
        ...

    def get_task_run(self, backend_id: str) -> TaskRun | None:
        """The run with this Celery task id, or ``None``."""
        ...

    def get_task_runs(self, task_id: int, *, limit: int = 20) -> list[TaskRun]:
        """The most recent runs of a task, newest first."""
        ...

    # -- retention ----------------------------------------------------------

    def delete_old_runs(self, *, ended_before: datetime, limit: int = 10_000) -> int:
        """Delete up to ``limit`` ended runs that ended before ``ended_before``.
        Open runs are never deleted. Returns the number deleted."""
        ...

    def delete_old_batches(self, *, claimed_before: datetime, limit: int = 10_000) -> int:
        """Delete up to ``limit`` dispatch batches claimed before
        ``claimed_before``; a run whose batch is gone counts as published
        when it was scheduled. Returns the number deleted."""
        ...

    def delete_finished_oneshot_tasks(
        self, *, updated_before: datetime, limit: int = 10_000
    ) -> int:
        """Delete up to ``limit`` one-shot tasks that are completed, disabled
        or cancelled and unchanged since ``updated_before``, with their runs.
        A task with an open run (disabled while its run goes on) is kept."""
        ...

    # -- lease and steal protocols (DESIGN.md §4) -------------------------------
    # Instants are the database's clock; each call is one transaction.

    def acquire_lease(
        self,
        backend_id: str,
        *,
        node: str,
        name: str,
        tag: str,
        apply: ApplyOutcome | None = None,
    ) -> LeaseGrant:
        """Claim the run ``backend_id`` and its task's ownership for the
        worker ``name`` on ``node``, under the unique ``tag`` of this copy.

        Granted (``ok``): the run becomes ``started`` (its start kept if the
        listener recorded one, else the DB's now), ``worker = name@node``,
        history entry ``assigned``; the task gets ``owner_*`` with
        ``owner_started_at = owner_last_ping_at = now`` and no steal pending.
        Asking again with the owning tag is granted again, changing nothing.
        Refused, in this order: ``unknown_run``; ``finished_run`` (the run
        ended: a late duplicate); ``already_running`` (another tag owns the
        task); ``cancelled`` / ``disabled`` (task status); ``banned_node``
        (``node`` in ``dont_run_on_nodes``); ``blackout`` (now inside a
        window). With ``apply``, a cancelled/disabled refusal ends the run
        ``cancelled`` and a blackout refusal ends it ``lost`` (the task is
        given back to its schedule); ``already_running`` and ``finished_run``
        add the history entry ``refused_copy``; other refusals write nothing."""
        ...

    def guard_start(
        self,
        backend_id: str,
        *,
        node: str,
        name: str,
        tag: str,
        apply: ApplyOutcome | None = None,
    ) -> LeaseGrant:
        """The start guard of every task type: exactly :meth:`acquire_lease`
        (same checks, same refusals, same writes) except that the owner does
        not ping: ``owner_last_ping_at`` stays null, so the steal step leaves
        the task alone and the worker's liveness (heartbeats, offline events)
        decides instead. The ownership is released when the run ends, by
        whatever ends it. A refused second copy (``already_running``,
        ``finished_run``) adds the history entry ``refused_copy`` to the run;
        its body must not run. A grant may carry ``db_now`` only (``task``
        and ``run`` ``None``: the common case is decided in one statement)."""
        ...

    def release_start(self, backend_id: str, *, tag: str) -> bool:
        """The body of the run asked Celery for a retry (a new delivery with
        the same id): when ``tag`` owns the task and the run is open, the
        ownership is released (the run stays open and started, history
        ``retrying``) so that the retried delivery passes the guard. True
        then; otherwise nothing is written."""
        ...

    def ping_lease(self, backend_id: str, *, tag: str, progress: float | None = None) -> PingReply:
        """The owner's heartbeat. Stop (``proceed`` false) with ``stolen``
        when ``tag`` no longer owns the task, ``finished`` when the run has
        ended, ``cancelled`` when the task is cancelled or disabled,
        ``blackout`` when now is in a blackout window; nothing is written
        then. Otherwise ``ok``: ``owner_last_ping_at = now``, ``progress``
        stored on the run, and a pending steal cleared (``steal_start_at``
        back to null, history entry ``pinged_late``)."""
        ...

    def finish_lease(
        self,
        backend_id: str,
        *,
        tag: str,
        status: RunStatus,
        result: Any = None,
        error: str | None = None,
        apply: ApplyOutcome | None = None,
    ) -> TaskRun | None:
        """The owner's final write: when ``tag`` still owns the task and the
        run is open, end the run exactly as :meth:`end_task_run` (``ended`` =
        the DB's now, ``apply`` in the same transaction) and release the
        ownership (without ``apply``, a ``scheduled`` task goes back to
        ``waiting``). ``timed_out`` adds the history entry ``timed_out``.
        Otherwise (ended, stolen, yielded, unknown) nothing is written and the
        run is returned as stored: calling it twice is harmless."""
        ...

    def yield_lease(
        self, backend_id: str, *, tag: str, apply: ApplyOutcome | None = None
    ) -> TaskRun | None:
        """Warm shutdown: when ``tag`` owns the task and the run is open, the
        run ends ``lost`` (a neutral outcome: no statistic moves) with the
        history entry ``yielded``, the ownership is released and the task is
        runnable at once in a new slot (``waiting``, ``next_run = max(now,
        slot + 1 µs)``: the run's own slot and backend id are taken; when now
        is in a blackout window, the policy's time past it). Otherwise nothing
        is written."""
        ...

    def steal_expired_leases(
        self,
        *,
        ping_timeout: timedelta,
        grace: timedelta,
        apply: ApplyOutcome | None = None,
        limit: int = 1000,
    ) -> StealReport:
        """The monitor's steal step. Owned tasks whose last ping is older
        than ``ping_timeout`` and with no steal pending get ``steal_start_at
        = now`` (their open run: history ``pinged_late``); owned tasks whose
        ``steal_start_at`` is older than ``grace`` lose their run: it ends
        ``lost`` (history ``stolen``, ``apply`` in the same transaction), the
        ownership is released and the task is runnable at once as in
        :meth:`yield_lease`. A late ping from the old owner then answers
        ``stolen``. Rows another transaction holds are skipped (PostgreSQL),
        at most ``limit`` tasks per step."""
        ...

    # -- monitor duties (DESIGN.md §4) ---------------------------------------------
    # Runs whose task is leased (an owner that pings, ``owner_last_ping_at``
    # set) are never ended by these calls: the steal protocol decides about
    # them. Runs let through by the start guard (owner, no pings) are.

    def record_worker_sightings(self, sightings: Sequence[WorkerSighting]) -> list[WorkerSighting]:
        """Record worker events (heartbeat, online, offline) in the ``worker``
        table: per hostname, the latest event of the batch sets
        ``last_heartbeat_at`` (the event's own timestamp), ``online``,
        ``freq`` and ``pid`` (kept when the event has none) -- unless the
        stored heartbeat is newer (events out of order change nothing).

        Returns the sightings that show a **restart**: a worker of a known
        name whose main process changed (another ``pid`` than recorded, not
        older than the record). The old process is gone; its open runs are
        for :meth:`end_worker_runs` at the sighting's time. A worker that
        went offline is not ended here: after a grace (a warm shutdown says
        offline first and then finishes its runs, a broker reconnect says
        offline and online again), :meth:`sweep_silent_workers` does it."""
        ...

    def get_workers(self) -> list[WorkerState]:
        """Every worker the listener has seen, ordered by hostname."""
        ...

    def end_worker_runs(
        self,
        worker: str,
        *,
        at: datetime,
        apply: ApplyOutcome | None = None,
        limit: int = 1000,
    ) -> list[TaskRun]:
        """A ``worker-offline`` event: end as ``lost`` at ``at`` the open runs
        (started or dispatched) whose ``worker`` is ``worker`` and that did
        not start after ``at`` (a worker restarted under the same name keeps
        its new runs), exactly as a stolen lease: ``apply`` in the same
        transaction, history entry ``worker_offline``, the task runnable at
        once in a new slot. Returns the runs ended (at most ``limit``)."""
        ...

    def sweep_silent_workers(
        self,
        *,
        now: datetime,
        timeout: timedelta | None = None,
        offline_grace: timedelta = timedelta(0),
        apply: ApplyOutcome | None = None,
        limit: int = 1000,
    ) -> WorkerSweep:
        """The monitor's catch-up for missed offline events (lossy Redis
        events, ``kill -9``). Online workers whose ``last_heartbeat_at`` is
        older than ``now - timeout`` are marked offline (``timeout`` ``None``:
        per worker, the longer of 3 x its heartbeat ``freq`` and 180 s).
        Then the open runs of every worker offline for longer than
        ``offline_grace`` or its timeout, whichever is shorter (since its
        last event), that started no later
        than its last heartbeat, or longer ago than its timeout, end ``lost``
        at ``now`` as in :meth:`end_worker_runs`. Raises InvalidInput for a
        timeout <= 0."""
        ...

    def expire_oneshot_tasks(
        self, *, now: datetime, grace: timedelta = timedelta(0), limit: int = 1000
    ) -> list[Expiry]:
        """One-shot tasks that are ``waiting``, were never dispatched (no run,
        no recorded start or end) and whose should_start_by (the policy's
        :func:`start_times` at ``now``: T + ``max_delay``) passed more than
        ``grace`` ago become ``disabled``; each gets a ``cancelled`` run (its
        slot, ended at ``now``, ``error`` saying why, history ``expired``) and
        ``next_run`` moves 1 µs past that slot. At most ``limit`` per call,
        earliest deadline first; rows being claimed are skipped (PostgreSQL)."""
        ...

    def acquire_lock(self, name: str, *, holder: str, ttl: timedelta) -> LockState:
        """Take or renew the lock ``name`` for ``holder`` until the database's
        now + ``ttl``, with one conditional UPSERT: it succeeds when nobody
        holds the lock, ``holder`` already does, or the holder's time ran out
        (a crashed holder loses the lock after ``ttl``). The answer says who
        holds it and until when."""
        ...

    def release_lock(self, name: str, *, holder: str) -> bool:
        """Give up the lock ``name`` if ``holder`` holds it (True then)."""
        ...
