"""Task types and tasks: create, read, search, act on them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from ..domain.model import Priority, Task, TaskType

if TYPE_CHECKING:
    from ..policy.type_edit import TypeEditReport


from .values import ALL_TASKS, ImportSummary, TaskFilter, WaitingEntry


class TaskStore(Protocol):
    """Task types and tasks: create, read, search, act on them."""

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

    def update_task_type(
        self, name: str, *, now: datetime | None = None, **changes: Any
    ) -> TaskType:
        """Change fields of a task type (not its name) and return it.

        ``changes`` are typed values (durations as ``timedelta``...), of the
        fields in :data:`~swh_like_scheduler.intake.editing.TASK_TYPE_EDITABLE`;
        ``None`` unsets a nullable one. The result is validated as a whole
        before anything is written, and against the tasks it governs (live
        or disabled, :mod:`~swh_like_scheduler.policy.type_edit`): an edit
        that would make one of them break a rule it kept (a retry policy
        whose worst case no longer fits a task's period, a type nobody
        could make an adaptive task of...) raises :class:`InvalidInput`
        naming the first setting given (cron schedules are judged from
        ``now``, default: the clock). Its tasks keep their times (the new
        settings apply from their next computation, a run's outcome), but
        for those whose times read a setting changed (a retry awaited under
        a changed retry policy, an adaptive task without an interval of its
        own under a changed default interval): their ``next_run`` and
        deadline are computed again in the same transaction.
        Raises :class:`NotFound` for an unknown type, :class:`InvalidInput`
        for another field (``paused_at``: :meth:`pause_task_type` and
        :meth:`resume_task_type` change it), and :class:`TaskBusy` for a
        new ``backend_name`` or ``queue`` while runs of the type are open
        (dispatched or running: their messages name the current ones).
        """
        ...

    def preview_task_type_update(
        self, name: str, *, now: datetime | None = None, **changes: Any
    ) -> TypeEditReport:
        """What :meth:`update_task_type` with ``changes`` would do to the
        type's tasks, writing nothing: how many it governs, the rules it
        would break (then the update is refused: :meth:`TypeEditReport.refusal`)
        and the adaptive intervals it would move into new bounds. Raises
        as :meth:`update_task_type` does for bad fields or an unknown type."""
        ...

    def pause_task_type(self, name: str, *, now: datetime) -> TaskType:
        """Pause the task type ``name`` and return it: ``paused_at`` becomes
        ``now`` (in UTC), unless it is paused already (then the first
        instant stays and nothing is written).

        While a type is paused :meth:`claim_ready_tasks` claims none of its
        tasks (checked in the claim's own transaction), :meth:`record_room`
        records nothing for it and :meth:`expire_oneshot_tasks` expires
        none of its tasks. Its tasks keep waiting as they are; runs already
        claimed go on and their outcomes are recorded as usual.
        Raises :class:`UnknownTaskType` for an unknown type.
        """
        ...

    def resume_task_type(self, name: str) -> TaskType:
        """Resume the task type ``name`` (``paused_at`` becomes ``None``;
        nothing is written if it was not paused) and return it; its ready
        tasks are claimed again by the next runner pass (runners waiting
        for work are woken where the store can: PostgreSQL).
        Raises :class:`UnknownTaskType` for an unknown type.
        """
        ...

    # -- tasks --------------------------------------------------------------

    def create_tasks(self, tasks: Iterable[Task], *, now: datetime) -> list[Task]:
        """Create tasks atomically and return them in the order given.

        A task whose arguments take more than the store's
        ``max_argument_bytes`` of canonical JSON is refused
        (:class:`InvalidInput` ``arguments``) and nothing is written.

        Each task must have ``id=None``; its ``next_run`` and ``deadline`` are
        stored as given. A periodic task without a cooldown (``None``; an
        explicit 0 is kept) is stored with
        :func:`~swh_like_scheduler.policy.default_cooldown` of its period.
        Creation is idempotent:

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

    def waiting_entries(
        self,
        task_type: str,
        priority: Priority,
        *,
        after: tuple[datetime, int] | None = None,
        until: tuple[datetime, int] | None = None,
        limit: int = 10_000,
    ) -> list[WaitingEntry]:
        """The waiting tasks of ``task_type`` and class ``priority``, as
        ``(id, next_run, deadline)`` only, in the class's dispatch order
        (deadline, then id): those whose ``(deadline, id)`` is after
        ``after`` and not after ``until`` (either bound optional), at most
        ``limit``. What the Redis index files: a rebuild reads a type class
        by class, earliest deadlines first, in pages of these (keyset
        paging: pass a page's last key as the next one's ``after``)."""
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

    def edit_task(
        self,
        *,
        task_id: int | None = None,
        key: str | None = None,
        changes: Mapping[str, Any],
        now: datetime,
    ) -> Task:
        """Change fields of the task ``task_id`` (or the one with client key
        ``key``) and return it, in one transaction with its row locked.

        ``changes`` are typed values (as
        :func:`~swh_like_scheduler.intake.editing.task_changes` gives them) of the
        fields in :data:`~swh_like_scheduler.intake.editing.TASK_EDITABLE`. The
        task is checked as at creation and, unless a run holds it, its
        ``next_run`` and ``deadline`` are computed again by the policy
        engine for the new schedule from its history
        (:func:`~swh_like_scheduler.intake.edit.edited_task`); its status
        does not change. An edit that changes nothing writes nothing.

        Raises :class:`NotFound` for an unknown task, :class:`InvalidInput`
        naming the field, :class:`TaskBusy` for a field marked ``IDLE``
        while a run holds the task (status ``scheduled`` or a lease owner),
        and :class:`DuplicateTask` when a live task without a key would
        become identical to another live one. Nothing is written then.
        """
        ...

    def update_task(self, task: Task, *, expected_updated_at: datetime | None = None) -> Task:
        """Write every field of ``task`` (identified by its id) and return it.

        With ``expected_updated_at``, the write happens only if the stored
        task still has that ``updated_at`` (optimistic concurrency); otherwise
        :class:`Conflict` is raised. Raises :class:`NotFound` for an unknown id.
        """
        ...
