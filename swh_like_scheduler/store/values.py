"""The values of the store interface: filters, summaries, capability flags
(:mod:`.interface` re-exports them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..model import (
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
)

if TYPE_CHECKING:
    pass


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


@dataclass(frozen=True)
class WaitingEntry:
    """A waiting task as the Redis index files it
    (:meth:`SchedulerStore.waiting_entries`): its id and its two instants."""

    id: int
    next_run: datetime
    deadline: datetime

    @property
    def key(self) -> tuple[datetime, int]:
        """Its place in the dispatch order of its class: (deadline, id)."""
        return self.deadline, self.id


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
    #: runs ended within :data:`ENDED_WINDOW` before ``now``, per ``(type, run status)``
    ended_runs: dict[tuple[str, str], int] = field(default_factory=dict)
    #: one-shot tasks expired within :data:`ENDED_WINDOW`, per type
    expired: dict[str, int] = field(default_factory=dict)
    #: when the oldest open run was dispatched (``None``: no open run)
    oldest_open_run: datetime | None = None
    #: the latest runner pass that had room for every ready task of a type
    last_room_at: datetime | None = None
    #: runs dispatched within :data:`ENDED_WINDOW` before ``now``, per type
    #: (read with the open runs only)
    dispatched: dict[str, int] = field(default_factory=dict)


#: the window of :attr:`ScheduleHealth.ended_runs`
ENDED_WINDOW = timedelta(hours=1)


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
