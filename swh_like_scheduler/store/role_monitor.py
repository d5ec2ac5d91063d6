"""The monitor's duties (DESIGN.md §4): workers, one-shot expiry, the monitor's lock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from ..domain.model import Priority, TaskRun, TypeLoad

if TYPE_CHECKING:
    from ..domain.records import (
        BlindWindow,
        Expiry,
        HostClock,
        LockState,
        WorkerChange,
        WorkerSighting,
        WorkerState,
        WorkerSweep,
    )


from .values import ApplyOutcome


class MonitorStore(Protocol):
    """The monitor's duties (DESIGN.md §4): workers, one-shot expiry, the monitor's lock."""

    # Runs whose task is leased (an owner that pings, ``owner_last_ping_at``
    # set) are never ended by these calls: the steal protocol decides about
    # them. Runs let through by the start guard (owner, no pings) are.

    def record_worker_sightings(self, sightings: Sequence[WorkerSighting]) -> list[WorkerChange]:
        """Record worker events (heartbeat, online, offline) in the ``worker``
        table: per hostname, the latest event sets ``last_heartbeat_at``
        (the event's own timestamp), ``online`` and ``freq`` (kept when the
        event has none) -- unless the stored heartbeat is newer (events out
        of order change nothing of these); the main processes seen under
        the name are kept apart (``pid``, ``other_pid``), each batch's
        events in time order.

        Returns what the processes show
        (:func:`~swh_like_scheduler.policy.workers.see_worker`): a
        **restart** when a main process has been silent for
        :func:`~swh_like_scheduler.policy.workers.restart_silence` while
        another sends under its name (it is gone; its open runs are for
        :meth:`end_worker_runs`, keeping those of ``pid``), a
        **duplicate** when two processes both send under it (two live
        workers share a name: nothing of either is ended). A worker that
        went offline is not ended here: after a grace (a warm shutdown says
        offline first and then finishes its runs, a broker reconnect says
        offline and online again), :meth:`sweep_silent_workers` does it."""
        ...

    def get_workers(self) -> list[WorkerState]:
        """Every worker the listener has seen, ordered by hostname."""
        ...

    def database_now(self) -> datetime:
        """The database's clock (aware UTC): the one clock that decides."""
        ...

    def record_host_clock(self, holder: str, *, role: str, offset_seconds: float) -> HostClock:
        """Record how far the host clock of process ``holder`` (a runner,
        monitor, listener...) is from the database's: the database's instant
        minus the host's, in seconds, measured now (the database's clock).
        One row per holder, replaced. :class:`InvalidInput` for an offset
        that is not a finite number of seconds."""
        ...

    def get_host_clocks(self, *, since: datetime | None = None) -> list[HostClock]:
        """The hosts' offsets recorded (measured at or after ``since``), by holder."""
        ...

    def record_worker_clocks(self, offsets: Mapping[str, float | None]) -> None:
        """Set the ``clock_offset`` of workers by name (the database's clock
        minus the worker's, seconds; ``None``: not known); names with no row
        are ignored."""
        ...

    def mark_blind_workers(self, windows: Sequence[BlindWindow]) -> list[WorkerState]:
        """Record what the listener learnt of workers' task events: each
        window is folded into its worker's row in order
        (:func:`~swh_like_scheduler.policy.blind.fold_window`: a window of a
        former process replaced, an open one opened or kept open, a close
        ending an open one, task names added up). A name with no row is
        ignored (its heartbeats are recorded first). Returns the rows that
        changed, as they are now."""
        ...

    def end_worker_runs(
        self,
        worker: str,
        *,
        at: datetime,
        apply: ApplyOutcome | None = None,
        limit: int = 1000,
        pid: int | None = None,
    ) -> list[TaskRun]:
        """A ``worker-offline`` event: end as ``lost`` at ``at`` the open runs
        (started or dispatched) whose ``worker`` is ``worker`` and that did
        not start after ``at`` (a worker restarted under the same name keeps
        its new runs), exactly as a stolen lease: ``apply`` in the same
        transaction, history entry ``worker_offline``, the task runnable at
        once in a new slot. With ``pid`` (the worker came back as that new
        main process), the runs whose ``assigned`` entry names that process
        are kept whenever they started: the new process's own, started before
        the event that told of it. Returns the runs ended (at most ``limit``)."""
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

    def ready_left_behind(
        self,
        task_type: str,
        *,
        at: datetime,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
    ) -> list[Priority]:
        """The classes among ``priorities`` (default all, in dispatch order)
        in which a task of ``task_type`` that a runner pass begun at ``at``
        could have claimed is still ``waiting``: ready then (``next_run <=
        at``), last written no later (``updated_at <= at``: created,
        enabled, respawned or edited before the pass began) and runnable on
        ``nodes`` (as :meth:`claim_ready_tasks` reads them) — whether or not
        another transaction holds its row right now (a plain read, which
        never waits for it).

        A runner asks after its claims took fewer tasks than it had room
        for: a class with such a task left had no room, whatever its claims
        say (they skipped rows another transaction held: a claim cancelled
        by its time limit, a runner that died before its commit; or the
        pass stopped short), and its room is not recorded
        (:meth:`record_room`). Tasks it could not take (banned from every
        live node, put back to the end of a blackout window) are not
        counted. Raises InvalidInput for a naive ``at``."""
        ...

    def record_room(
        self, task_type: str, *, at: datetime, priorities: Sequence[Priority] | None = None
    ) -> None:
        """A runner pass of ``task_type`` that began at ``at`` (its ``now``,
        before any of its claims read the ready tasks) claimed every task
        of the ``priorities`` classes (default all) it could, with capacity
        to spare, and left none behind (:meth:`ready_left_behind`). Kept per
        type and class, the latest instant wins: :meth:`expire_oneshot_tasks`
        reads it. Nothing is recorded for a paused type
        (:meth:`pause_task_type`): its pass took nothing because of the
        pause, not for want of ready tasks. Raises InvalidInput for a naive
        ``at``."""
        ...

    def expire_oneshot_tasks(
        self, *, now: datetime, grace: timedelta = timedelta(0), limit: int = 1000
    ) -> list[Expiry]:
        """Disable the one-shot tasks that the platform could have served and
        did not: tasks ``waiting`` with a ``max_delay``, never dispatched (no
        run, no recorded start or end), whose should_start_by (the policy's
        :func:`start_times` at ``now``: T + ``max_delay``) plus ``grace`` is
        before ``now``, and for which the latest pass with room of their type
        and class (:meth:`record_room`) began after they could be claimed:
        after that should_start_by plus ``grace``, after their ``next_run``
        and after their last write (created, enabled, respawned, edited; the
        policy's :func:`may_expire`). A one-shot without ``max_delay``
        never expires, nor one that was late because no runner passed or its
        queue was full: it is dispatched when room comes back. Each expired
        task gets a ``cancelled`` run (its slot, ended at ``now``, ``error``
        saying why, history ``expired``) and ``next_run`` moves 1 µs past that
        slot. At most ``limit`` per call, earliest deadline first; rows being
        claimed are skipped (PostgreSQL), and so are the tasks of a paused
        type (:meth:`pause_task_type`)."""
        ...

    def measure_type_loads(
        self, *, now: datetime, window: timedelta, slack: timedelta
    ) -> dict[str, TypeLoad]:
        """Measure, per task type, its live adaptive tasks' load at ``now``
        and keep it on the type (``load_*``), all types in one transaction:
        ``demand``, the worker-seconds per second they ask for at their
        current intervals (each ``avg / (I + avg)``; tasks without a known
        duration count as the mean of the others); ``delivered``, the
        worker-seconds their runs took within ``[now - window, now]`` over
        ``window``; ``backlog``, how many wait with a ``next_run`` more than
        ``slack`` before ``now``. The capacity-aware interval rule reads them
        (:func:`~swh_like_scheduler.policy.adapt_interval`). Raises
        InvalidInput for a window <= 0 or a negative slack."""
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
