"""The values of the store interface: filters, summaries, capability flags
(:mod:`.interface` re-exports them)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..domain import validation
from ..domain.exceptions import InvalidInput
from ..domain.model import Priority, RunStatus, ScheduleKind, Task, TaskRun, TaskStatus

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
    #: per type with runs dispatched and not started (waiting in the
    #: broker): how many (up to the bound the call gave), and the earliest
    #: deadline (should_start_by) of their tasks
    queued: dict[str, tuple[int, datetime]] = field(default_factory=dict)
    #: runs dispatched within :data:`ENDED_WINDOW` before ``now``, per type
    #: (read with the open runs only)
    dispatched: dict[str, int] = field(default_factory=dict)


#: the window of :attr:`ScheduleHealth.ended_runs`
ENDED_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class LongRuns:
    """What a runner pass needs to keep worker slots from long runs
    (:meth:`~.interface.SchedulerStore.long_runs`)."""

    #: tasks of the type whose open run (dispatched or running) is a long run
    in_flight: int
    #: whether a task of the type that is not a long run is ready, or falls
    #: ready within the horizon asked
    short_due: bool
    #: whether a task of the type that is not a long run is dispatched or
    #: running (it comes back waiting when its run ends)
    short_in_flight: bool = False


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
    #: The planner chooses joins by the statistics ``ANALYZE`` gathers: a
    #: claim that joins a table just filled gathers them first
    #: (:meth:`GrabMethods._planner_statistics`).
    planner_statistics: bool = False


class BulkAction(StrEnum):
    """What :meth:`SchedulerStore.apply_bulk` does to the tasks it matches."""

    DISABLE = "disable"
    ENABLE = "enable"
    CANCEL = "cancel"
    DELETE = "delete"


#: the condition levels a :class:`BulkFilter` may name
CONDITION_LEVELS = ("OK", "WARNING", "ERROR")
#: most ids a :class:`BulkFilter` may name
BULK_MAX_IDS = 10_000
#: most tasks one :meth:`SchedulerStore.apply_bulk` call reads
BULK_MAX_SCAN = 100_000
#: most task types one census scan compares (``type_versions``, ``retyped``):
#: each costs the statement a few parameters, and a database takes some
#: tens of thousands (PostgreSQL 65,535; SQLite 32,766 by default)
MAX_TYPE_VERSIONS = 5_000
#: task ids a :class:`BulkReport` gives as a sample
BULK_SAMPLE = 10


@dataclass(frozen=True)
class BulkFilter:
    """Which tasks a bulk action takes (:meth:`SchedulerStore.apply_bulk`).

    Every criterion given must hold (``None`` or empty: any). ``condition``
    names levels (``OK``, ``WARNING``, ``ERROR``) of the tasks' conditions
    at the action's ``now``; ``arguments`` are ``(name, value)`` pairs that
    must all be equal to the task's keyword argument ``name``, or, for a
    name made of digits, to its positional argument at that index (values
    compared as JSON values: ``5`` is not ``"5"``). A filter with no
    criterion is refused unless ``everything`` says that every task is
    meant."""

    type: str | None = None
    status: tuple[TaskStatus, ...] | None = None
    condition: tuple[str, ...] | None = None
    key_prefix: str | None = None
    arguments: tuple[tuple[str, Any], ...] = ()
    ids: tuple[int, ...] | None = None
    everything: bool = False
    schedule_kind: ScheduleKind | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__
        if self.type is not None:
            validation.identifier("type", self.type)
        if self.schedule_kind is not None:
            try:
                put(self, "schedule_kind", ScheduleKind(self.schedule_kind))
            except ValueError:
                known = ", ".join(k.value for k in ScheduleKind)
                raise InvalidInput(
                    "kind", f"{self.schedule_kind!r} is not one of {known}"
                ) from None
        if self.status is not None:
            put(self, "status", tuple(_status(s) for s in self.status))
        if self.condition is not None:
            levels = tuple(str(c).upper() for c in self.condition)
            unknown = [c for c in levels if c not in CONDITION_LEVELS]
            if unknown or not levels:
                raise InvalidInput(
                    "condition", f"{unknown[0] if unknown else ''!r} is not OK, WARNING or ERROR"
                )
            put(self, "condition", levels)
        if self.key_prefix is not None and not (
            isinstance(self.key_prefix, str) and 0 < len(self.key_prefix) <= 500
        ):
            raise InvalidInput("key_prefix", "must be a non-empty text of at most 500 characters")
        validation.storable("key_prefix", self.key_prefix)
        pairs = tuple(tuple(p) for p in self.arguments)
        for pair in pairs:
            if len(pair) != 2 or not isinstance(pair[0], str):
                raise InvalidInput("arguments", f"{pair!r} is not a (name, value) pair")
            name = pair[0]
            if not (name.isidentifier() or (name.isdigit() and len(name) <= 6)):
                raise InvalidInput(
                    "arguments",
                    f"{name!r} is neither a keyword argument's name nor a position (0, 1...)",
                )
        put(self, "arguments", pairs)
        if self.ids is not None:
            ids = tuple(self.ids)
            if len(ids) > BULK_MAX_IDS:
                raise InvalidInput("ids", f"names at most {BULK_MAX_IDS} ids")
            if any(isinstance(i, bool) or not isinstance(i, int) or i < 1 for i in ids):
                raise InvalidInput("ids", "must be positive task ids")
            put(self, "ids", ids)
        if not isinstance(self.everything, bool):
            raise InvalidInput("everything", "must be true or false")
        if self.is_empty() and not self.everything:
            raise InvalidInput(
                "filter",
                "no criterion given (type, kind, status, condition, key_prefix, arguments, "
                "ids); "
                "acting on every task must be asked for (everything)",
            )

    def is_empty(self) -> bool:
        """Whether no criterion is given (every task matches)."""
        return (
            self.type is None
            and self.schedule_kind is None
            and self.status is None
            and self.condition is None
            and self.key_prefix is None
            and not self.arguments
            and self.ids is None
        )

    def matches_arguments(self, task: Task) -> bool:
        """Whether ``task``'s arguments hold every pair of ``arguments``."""
        for name, value in self.arguments:
            if name.isdigit():
                index = int(name)
                if index >= len(task.args) or not _same(task.args[index], value):
                    return False
            elif name not in task.kwargs or not _same(task.kwargs[name], value):
                return False
        return True

    def describe(self) -> str:
        """The criteria in words (``type 'load-git', status waiting``)."""
        parts = []
        if self.ids is not None:
            parts.append(f"{len(self.ids)} ids")
        if self.type is not None:
            parts.append(f"type {self.type!r}")
        if self.schedule_kind is not None:
            parts.append(f"kind {self.schedule_kind.value}")
        if self.status is not None:
            parts.append("status " + "|".join(s.value for s in self.status))
        if self.condition is not None:
            parts.append("condition " + "|".join(self.condition))
        if self.key_prefix is not None:
            parts.append(f"key starting with {self.key_prefix!r}")
        parts += [f"argument {n}={json.dumps(v)}" for n, v in self.arguments]
        return ", ".join(parts) if parts else "every task"


def _status(value: Any) -> TaskStatus:
    try:
        return TaskStatus(value)
    except ValueError:
        known = ", ".join(s.value for s in TaskStatus)
        raise InvalidInput("status", f"{value!r} is not one of {known}") from None


def _same(stored: Any, wanted: Any) -> bool:
    """Equal as JSON values (``True`` is not ``1``, ``1`` is ``1.0``)."""
    return json.dumps(stored, sort_keys=True) == json.dumps(wanted, sort_keys=True) or (
        type(stored) is not bool
        and type(wanted) is not bool
        and isinstance(stored, int | float)
        and isinstance(wanted, int | float)
        and stored == wanted
    )


@dataclass(frozen=True)
class BulkReport:
    """What one :meth:`SchedulerStore.apply_bulk` (or
    :meth:`SchedulerStore.preview_bulk`) call found and did."""

    action: BulkAction
    #: tasks read that match the filter and that the action applies to
    matched: int = 0
    #: of those, the ones changed (0 for a preview)
    changed: int = 0
    #: matched but left as they are: a task with an open run (delete), a
    #: task identical to a live one (enable), a task that changed between
    #: the read and the write and matched no more
    held: int = 0
    #: the first ids matched (at most :data:`BULK_SAMPLE`)
    sample: tuple[int, ...] = ()
    #: backend ids of the runs a cancel ended before they started: their
    #: messages may still be queued (revoke them)
    revoke: tuple[str, ...] = ()
    #: the ids changed and their types (to keep an index in line)
    changed_ids: tuple[int, ...] = ()
    types: tuple[str, ...] = ()
    #: where to go on (``after_id`` of the next call); ``None``: done
    next_after_id: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", BulkAction(self.action))

    def then(self, following: BulkReport) -> BulkReport:
        """The counts and sample of this report and the next call's, as one
        (without ids: act on each call's ``revoke`` and ``changed_ids`` as
        it comes, a million of them are not kept)."""
        return BulkReport(
            action=self.action,
            matched=self.matched + following.matched,
            changed=self.changed + following.changed,
            held=self.held + following.held,
            sample=(self.sample + following.sample)[:BULK_SAMPLE],
            next_after_id=following.next_after_id,
        )


#: the levels of a condition by rank, worst first (``task_condition.rank``)
LEVEL_RANKS = ("ERROR", "WARNING", "OK")


@dataclass(frozen=True)
class ConditionRow:
    """One watched task's condition as a census assessed it
    (:meth:`CensusStore.put_conditions`), with the task's own values it was
    assessed on: a row that no longer matches its task is assessed again."""

    task_id: int
    type: str
    level: str
    reason: str
    #: when its work should be done by (``None``: no such time, disabled)
    finish_by: datetime | None
    #: until when its level holds with the clock alone (``None``: until
    #: the task changes)
    holds_until: datetime | None
    kind: str
    priority: str
    #: lower-case key and arguments (only for a task that is not OK)
    text: str
    seen_updated_at: datetime
    seen_started_at: datetime | None
    seen_status: str
    #: the fingerprint of the type's settings it was assessed with
    type_seen: str

    def __post_init__(self) -> None:
        if self.level not in LEVEL_RANKS:
            raise InvalidInput("level", f"must be one of {', '.join(LEVEL_RANKS)}")


@dataclass(frozen=True)
class CensusRecord:
    """A census as stored: per type, tasks per level; tasks per type and
    status; how many were not OK; the instant it holds for."""

    id: int
    at: datetime
    conditions: dict[str, dict[str, int]]
    tasks: dict[tuple[str, str], int]
    not_ok: int
    #: tasks assessed by the refresh that made it, and the seconds it took
    assessed: int
    took: float
    #: the type fingerprints the ledger was brought to
    versions: dict[str, str] = field(default_factory=dict)
    #: the task id the ledger's rolling sweep goes on after
    sweep_after: int = 0


@dataclass(frozen=True)
class StoredForecast:
    """A forecast as recorded: the instant it starts from, the seconds
    computing it took, and its JSON (:meth:`~..simulator.forecast.Forecast.to_json`)."""

    id: int
    at: datetime
    took: float
    body: dict[str, Any]


@dataclass(frozen=True)
class ProblemQuery:
    """Which problems a page lists (empty: any); ``q`` is searched in the
    lower-case key and arguments."""

    type: str = ""
    level: str = ""
    kind: str = ""
    priority: str = ""
    q: str = ""
    #: with a ``level``: that level or worse
    at_least: bool = False


@dataclass(frozen=True)
class ProblemEntry:
    """A task that is not OK, as the ledger holds it."""

    id: int
    type: str
    level: str
    reason: str
    finish_by: datetime | None
    kind: str
    priority: str
    text: str
    assessed_at: datetime

    def late(self, now: datetime) -> float | None:
        """Seconds past its finish-by at ``now`` (``None``: no such time)."""
        return None if self.finish_by is None else (now - self.finish_by).total_seconds()
