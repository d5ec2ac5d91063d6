"""Claims, runs, dispatch batches, retention and the schedule's health."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from ..domain.enums import LONG_RUN, LONG_RUN_FLOOR
from ..domain.model import Claimed, DispatchOrder, Priority, RunStatus, TaskRun

if TYPE_CHECKING:
    from ..domain.records import Skip


from .values import ApplyOutcome, LongRuns, RunEnd, ScheduleHealth


class RunStore(Protocol):
    """Claims, runs, dispatch batches, retention and the schedule's health."""

    def claim_ready_tasks(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
        among: Sequence[int] | None = None,
        order: DispatchOrder = DispatchOrder.DEADLINE,
        short_only: bool = False,
        long_run: timedelta = LONG_RUN,
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
        class, then within a class ``order`` (:class:`DispatchOrder`; the
        default, ``deadline`` first, is that of :meth:`list_pending`). In one transaction,
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

        Nothing is claimed for a paused type (:meth:`pause_task_type`),
        read in the claim's own transaction: a pause that lands after the
        runner read the task types still holds.

        With ``short_only``, tasks whose runs are long runs are left
        waiting: expected to last ``long_run`` or more (their
        ``average_good_duration``, else their ``expected_duration``, else
        their or their type's ``max_expected_duration``), or whose last run
        failed after lasting that long; a task of unknown length is taken.
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
        order: DispatchOrder = DispatchOrder.DEADLINE,
        short_only: bool = False,
        long_run: timedelta = LONG_RUN,
    ) -> list[int]:
        """The ids of the tasks :meth:`claim_ready_tasks` with the same
        arguments would claim now (up to ``limit``), in dispatch order.
        Reads only and locks nothing: another claim may take them first."""
        ...

    def long_runs(
        self,
        task_type: str,
        *,
        now: datetime,
        within: timedelta,
        long_run: timedelta = LONG_RUN,
    ) -> LongRuns:
        """How many tasks of ``task_type`` have a long run open (dispatched
        or running; expected to last ``long_run`` or more, as
        :meth:`claim_ready_tasks` with ``short_only`` tells), whether a task
        of the type that is not a long run is dispatched or running, and
        whether one is waiting with a ``next_run`` no later than ``now +
        within`` (any class). One read, bounded by the runs in flight and
        the tasks due within the horizon. Raises InvalidInput for a naive
        ``now``, a negative ``within`` or a ``long_run`` that is not
        positive."""
        ...

    def short_slack(
        self, task_type: str, *, now: datetime, floor: timedelta = LONG_RUN_FLOOR
    ) -> timedelta | None:
        """How long the waiting task of ``task_type`` with the earliest
        ``deadline`` (any ``next_run``, any class) that a worker slot kept
        free at ``now`` can still help may yet wait for a slot: the time
        left to its deadline (negative once it is overdue). A slot kept
        helps a task whose expected run (its average good run, else its
        ``expected_duration``, else its or its type's
        ``max_expected_duration``; unknown counts as none) is shorter than
        that time, or than ``floor`` when less is left (an overdue ping is
        helped; a two-hour run due in ten minutes is not). ``None`` when
        there is none. One read, a walk of
        the waiting tasks in deadline order per class stopping at the first
        match. Raises InvalidInput for a naive ``now`` or a negative
        ``floor``."""
        ...

    # -- runs ---------------------------------------------------------------

    def skip_missed_firings(
        self, task_type: str, *, now: datetime, limit: int = 1000
    ) -> list[Skip]:
        """Drop the missed firings of the waiting tasks of ``task_type`` whose
        catch-up policy (their own, else their type's) is ``skip`` and whose
        firing is later than the grace at ``now`` (rules in
        :mod:`~swh_like_scheduler.policy.catchup`). Each such task gets **one**
        ``skipped`` run (its current slot, ended at ``now``, ``error`` saying
        which firings and why, history ``skipped``) and waits for the firing
        it resumes at (``skipped_until``, ``next_run``, ``deadline``); a
        one-shot task is disabled. A runner pass calls it before claiming,
        with the same ``now``, so no firing it drops is dispatched. Tasks
        being claimed are skipped over (PostgreSQL), tasks of a paused type
        are left alone, at most ``limit`` per call."""
        ...

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

    def schedule_health(
        self,
        *,
        now: datetime,
        counts: bool = True,
        runs: bool = True,
        queued_upto: int | None = None,
    ) -> ScheduleHealth:
        """Figures that say whether the schedule keeps up, read through
        indexes (no per-task computation): the oldest overdue waiting task
        per type, the oldest open run, the last claim, the last pass with
        room, the last worker sign of life, runs ended within the hour per
        type and status, expiries; with ``runs``, open runs per type and
        status and runs dispatched within the hour per type (left empty
        without: that joins every open run to the task table); with
        ``counts``, tasks per type and status (that reads the whole task
        table). The runs waiting in the broker per type
        (:attr:`ScheduleHealth.queued`) are counted up to ``queued_upto``
        (``None``: all; ``0``: not read): the earliest deadline among them
        is exact whatever the bound, and a count equal to the bound means
        at least that many. A negative bound is :class:`InvalidInput`."""
        ...

    def unstarted_run_counts(
        self,
        *,
        task_types: Sequence[str] | None = None,
        held: Mapping[str, datetime | None] | None = None,
    ) -> dict[str, int]:
        """Per task type (of ``task_types``, default all), how many runs are
        ``scheduled`` with their message published (or from before dispatch
        batches): the messages that are in a queue, prefetched by a worker,
        or lost. Types with none are absent. ``held`` leaves out, per type,
        every run (``None``) or those dispatched (``scheduled``) before an
        instant: runs a worker sending no task events may have taken
        (:func:`~swh_like_scheduler.policy.blind.holds`)."""
        ...

    def reclaim_unstarted_runs(
        self,
        *,
        now: datetime,
        limit: int = 1000,
        published_before: datetime | None = None,
        claimed_before: datetime | None = None,
        task_types: Sequence[str] | None = None,
        held: Mapping[str, datetime | None] | None = None,
    ) -> list[tuple[str, Claimed]]:
        """Take runs that never started so that their message can be
        published again with the same id: with ``claimed_before``, runs whose
        dispatch batch was claimed before it and never marked published
        (orphans: no message was ever sent); with ``published_before``, runs
        whose message went out before it (it may be lost: broker data gone,
        purged queue), up to ``limit``, oldest first, of ``task_types``
        (default all), but for those ``held`` names (as
        :meth:`unstarted_run_counts`; orphans are never held: no worker
        could take them).

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

    def get_task_runs(
        self,
        task_id: int,
        *,
        limit: int = 20,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[TaskRun]:
        """The most recent runs of a task, newest first; with ``statuses``,
        only the runs in one of them (its latest failure: the failed
        statuses and ``limit=1``)."""
        ...

    def count_task_runs(self, task_id: int) -> int:
        """How many runs of a task the store holds (retention deletes old
        ended runs: the count is of those kept)."""
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
