"""Frozen, validated domain objects: task types and tasks (task runs and the
plain values are in :mod:`.run_model` and :mod:`.enums`, re-exported here).

The words follow DESIGN.md §2. Objects are checked when built, so a value
that reaches the store is already known to be consistent; raw user input is
parsed into them by :mod:`swh_like_scheduler.intake.builders`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, time, timedelta
from types import MappingProxyType
from typing import Any, Self

from . import validation
from .enums import DEFAULT_CATCH_UP_GRACE as DEFAULT_CATCH_UP_GRACE
from .enums import DUE_MARGIN as DUE_MARGIN
from .enums import END_RUN_STATUSES as END_RUN_STATUSES
from .enums import OPEN_RUN_STATUSES as OPEN_RUN_STATUSES
from .enums import PRIORITY_ORDER as PRIORITY_ORDER
from .enums import RUNNER_ORDER as RUNNER_ORDER
from .enums import CatchUp as CatchUp
from .enums import DispatchOrder as DispatchOrder
from .enums import Policy as Policy
from .enums import Priority as Priority
from .enums import RunStatus as RunStatus
from .enums import ScheduleKind as ScheduleKind
from .enums import TaskStatus as TaskStatus
from .enums import catch_up_value as catch_up_value
from .enums import check_aware, check_duration, check_grace
from .enums import final_run_status as final_run_status
from .exceptions import InvalidInput
from .run_model import RUN_NAMESPACE as RUN_NAMESPACE
from .run_model import Claimed as Claimed
from .run_model import TaskRun as TaskRun
from .run_model import decode_json as decode_json
from .run_model import run_backend_id as run_backend_id

#: The duration fields of a task type.
TASK_TYPE_DURATIONS = (
    "default_interval",
    "min_interval",
    "max_interval",
    "retry_delay",
    "retry_cap",
    "retry_jitter",
    "max_expected_duration",
    "max_allowed_duration",
    "catch_up_grace",
)


#: the durations of a task type that 0 cannot be
POSITIVE_TYPE_DURATIONS = (
    "default_interval",
    "min_interval",
    "max_interval",
    "max_expected_duration",
    "max_allowed_duration",
)


#: the fields of a task type that the monitor measures (never set by hand)
TYPE_LOAD_FIELDS = ("load_demand", "load_delivered", "load_backlog", "load_measured_at")


@dataclass(frozen=True)
class TypeLoad:
    """One measurement of a task type's adaptive tasks (the monitor's
    ``measure_type_loads``): ``demand``, the worker-seconds per second they
    ask for at their current intervals (each task ``avg / (I + avg)``);
    ``delivered``, the worker-seconds per second their runs took over the
    window before ``measured_at``; ``backlog``, how many were overdue (ready
    for longer than the monitor's slack, not dispatched)."""

    demand: float
    delivered: float
    backlog: int
    measured_at: datetime

    def __post_init__(self) -> None:
        check_aware("measured_at", self.measured_at)

    @property
    def pressure(self) -> float | None:
        """Demand over delivered work (``None`` when nothing was delivered:
        no run ended in the window, which tells nothing of the capacity)."""
        return self.demand / self.delivered if self.delivered > 0 else None


@dataclass(frozen=True)
class TaskType:
    """One kind of work, served by Celery workers on its own queue."""

    type: str
    backend_name: str
    description: str = ""
    queue: str | None = None
    default_interval: timedelta | None = None
    min_interval: timedelta | None = None
    max_interval: timedelta | None = None
    backoff_factor: float | None = None
    max_queue_length: int | None = None
    num_retries: int | None = None
    retry_delay: timedelta = timedelta(minutes=5)
    retry_growth: float = 12.0
    retry_cap: timedelta = timedelta(hours=4)
    retry_jitter: timedelta = timedelta(0)
    max_expected_duration: timedelta | None = None
    max_allowed_duration: timedelta | None = None
    uses_lease: bool = False
    #: when an operator paused the type (UTC; ``None``: not paused): nothing
    #: of it is dispatched until it is resumed (``pause_task_type``)
    paused_at: datetime | None = None
    #: the default catch-up policy of its tasks (:class:`CatchUp`)
    catch_up: CatchUp = CatchUp.LATEST
    #: how late a firing may still run under ``catch_up = skip``
    catch_up_grace: timedelta = DEFAULT_CATCH_UP_GRACE
    #: what the monitor measured of the type's adaptive tasks
    #: (``measure_type_loads``; ``None``: never measured): the work they ask
    #: for and the work their runs delivered over the last window, both in
    #: worker-seconds per second, how many of them wait overdue, and when.
    #: The capacity-aware interval rule reads them (:mod:`.policy.capacity`).
    load_demand: float | None = None
    load_delivered: float | None = None
    load_backlog: int | None = None
    load_measured_at: datetime | None = None

    def __post_init__(self) -> None:
        validation.identifier("type", self.type)
        object.__setattr__(self, "catch_up", catch_up_value(self.catch_up) or CatchUp.LATEST)
        if self.catch_up_grace is None:  # a type always has one: the default
            object.__setattr__(self, "catch_up_grace", DEFAULT_CATCH_UP_GRACE)
        check_grace(self.catch_up_grace)
        validation.identifier("backend_name", self.backend_name)
        validation.storable("description", self.description)
        if self.queue is not None:
            validation.identifier("queue", self.queue)
        for name in TASK_TYPE_DURATIONS:
            check_duration(name, getattr(self, name))
        for name in POSITIVE_TYPE_DURATIONS:
            value = getattr(self, name)
            if value is not None and value <= timedelta(0):
                raise InvalidInput(name, f"{value} must be longer than zero")
        lo, default, hi = self.min_interval, self.default_interval, self.max_interval
        if lo is not None and hi is not None and lo > hi:
            raise InvalidInput("min_interval", f"{lo} is longer than max_interval {hi}")
        if default is not None and lo is not None and default < lo:
            raise InvalidInput("default_interval", f"{default} is shorter than min_interval {lo}")
        if default is not None and hi is not None and default > hi:
            raise InvalidInput("default_interval", f"{default} is longer than max_interval {hi}")
        if self.backoff_factor is not None:
            validation.positive_float("backoff_factor", self.backoff_factor, minimum=1.0)
        validation.non_negative_int("max_queue_length", self.max_queue_length)
        validation.non_negative_int("num_retries", self.num_retries)
        validation.positive_float("retry_growth", self.retry_growth, minimum=0.0)
        if self.retry_growth < 1.0:
            raise InvalidInput("retry_growth", f"{self.retry_growth} must be >= 1")
        bounds = (self.max_expected_duration, self.max_allowed_duration)
        if bounds[0] is not None and bounds[1] is not None and bounds[0] > bounds[1]:
            raise InvalidInput(
                "max_expected_duration",
                f"{bounds[0]} is longer than max_allowed_duration {bounds[1]}",
            )
        check_aware("paused_at", self.paused_at)
        check_aware("load_measured_at", self.load_measured_at)
        for name in ("load_demand", "load_delivered"):
            value = getattr(self, name)
            if value is not None and not value >= 0:  # NaN too
                raise InvalidInput(name, f"{value!r} is not a rate >= 0")
        validation.non_negative_int("load_backlog", self.load_backlog)

    @property
    def load(self) -> TypeLoad | None:
        """The last measurement of the type's load (``None``: never measured)."""
        if (
            self.load_measured_at is None
            or self.load_demand is None
            or self.load_delivered is None
            or self.load_backlog is None
        ):
            return None
        return TypeLoad(
            demand=self.load_demand,
            delivered=self.load_delivered,
            backlog=self.load_backlog,
            measured_at=self.load_measured_at,
        )

    @property
    def effective_queue(self) -> str:
        """The Celery queue its tasks are sent to (defaults to the backend name)."""
        return self.queue or self.backend_name

    def updated(self, **changes: Any) -> TaskType:
        """A copy with ``changes`` applied and validated again."""
        return replace(self, **changes)


@dataclass(frozen=True)
class BlackoutPeriod:
    """A local-time window in which a task must not run; may cross midnight."""

    start: time
    end: time

    def __post_init__(self) -> None:
        if self.start == self.end:
            raise InvalidInput("blackout_periods", f"window {self} is empty (start == end)")

    @classmethod
    def parse(cls, value: Mapping[str, Any] | Sequence[Any]) -> BlackoutPeriod:
        if isinstance(value, Mapping):
            if set(value) != {"start", "end"}:
                raise InvalidInput(
                    "blackout_periods", f"{dict(value)!r} must have exactly 'start' and 'end'"
                )
            start, end = value["start"], value["end"]
        elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
            start, end = value
        else:
            raise InvalidInput(
                "blackout_periods",
                f"{value!r} is not a window like {{'start': '23:00', 'end': '01:00'}}",
            )
        return cls(
            validation.time_of_day("blackout_periods", start),
            validation.time_of_day("blackout_periods", end),
        )

    def to_json(self) -> dict[str, str]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat()}

    def __str__(self) -> str:
        return f"{self.start.isoformat()}-{self.end.isoformat()}"


#: deepest nesting of lists and objects in a task's arguments
MAX_JSON_DEPTH = 32
#: default of the ``max_argument_bytes`` setting: JSON bytes of one task's arguments
MAX_ARGUMENT_BYTES = 64 * 1024


def canonical_json(value: Any) -> str:
    """The JSON text used to compare and hash task arguments (NaN and the
    infinities are refused: they are not JSON, and no database stores them)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _unjson(error: Exception) -> str:
    if isinstance(error, ValueError) and "Out of range float" in str(error):
        return "NaN and infinities are not JSON numbers (give a number, or a text in quotes)"
    return str(error)


def arguments_hash(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """A stable digest of a task's arguments, used to find identical tasks."""
    text = canonical_json({"args": list(args), "kwargs": dict(kwargs)})
    return hashlib.sha256(text.encode()).hexdigest()


_SCHEDULE_REQUIRED: dict[ScheduleKind, tuple[str, ...]] = {
    ScheduleKind.ONESHOT: (),
    ScheduleKind.PERIODIC: ("period",),
    ScheduleKind.CRON: ("cron", "cron_max_duration"),
    ScheduleKind.ADAPTIVE: ("current_interval",),
}
#: the schedule parameters each kind takes (the others must be unset)
SCHEDULE_ALLOWED: dict[ScheduleKind, frozenset[str]] = {
    ScheduleKind.ONESHOT: frozenset({"max_delay"}),
    ScheduleKind.PERIODIC: frozenset({"period", "cooldown"}),
    ScheduleKind.CRON: frozenset({"cron", "cron_max_duration"}),
    ScheduleKind.ADAPTIVE: frozenset({"current_interval"}),
}
SCHEDULE_PARAMETERS = tuple(name for names in SCHEDULE_ALLOWED.values() for name in names)
#: the durations of a task that 0 cannot be (a cooldown, a delay may)
POSITIVE_TASK_DURATIONS = (
    "period",
    "current_interval",
    "cron_max_duration",
    "max_expected_duration",
    "max_allowed_duration",
)


@dataclass(frozen=True)
class Task:
    """One unit of recurring or one-shot work.

    ``next_run`` is *can_start_by* and ``deadline`` is *should_start_by*
    (DESIGN.md §2-3). Statistics and ownership fields are written by the
    listener and the lease protocol; a task built by a client leaves them empty.
    """

    type: str
    next_run: datetime
    deadline: datetime
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    schedule_kind: ScheduleKind = ScheduleKind.ONESHOT
    key: str | None = None
    id: int | None = None
    status: TaskStatus = TaskStatus.WAITING
    priority: Priority = Priority.NORMAL
    # schedule parameters (which ones apply depends on schedule_kind)
    current_interval: timedelta | None = None  # adaptive
    period: timedelta | None = None  # periodic
    cooldown: timedelta | None = None  # periodic
    #: the cooldown is the scheduler's default (:func:`.policy.default_cooldown`),
    #: not one a client gave: it follows the period and the run time
    cooldown_is_default: bool = False
    cron: str | None = None  # cron
    cron_max_duration: timedelta | None = None  # cron
    max_delay: timedelta | None = None  # oneshot
    # catch-up after missed firings (None: the type's)
    catch_up: CatchUp | None = None
    catch_up_grace: timedelta | None = None
    #: the firing a skip of missed firings resumed at (``catch_up = skip``):
    #: the schedule's times are never earlier than it
    skipped_until: datetime | None = None
    # constraints
    tz: str = "UTC"
    blackout_periods: tuple[BlackoutPeriod, ...] = ()
    dont_run_on_nodes: tuple[str, ...] = ()
    max_expected_duration: timedelta | None = None
    max_allowed_duration: timedelta | None = None
    expected_duration: timedelta | None = None  # operator override of the EWMA
    retries_left: int = 0
    # statistics
    failure_count: int = 0
    last_good_start_at: datetime | None = None
    last_good_end_at: datetime | None = None
    last_start_at: datetime | None = None
    last_end_at: datetime | None = None
    average_good_duration: timedelta | None = None
    # lease ownership
    owner_node: str | None = None
    owner_name: str | None = None
    owner_tag: str | None = None
    owner_started_at: datetime | None = None
    owner_last_ping_at: datetime | None = None
    steal_start_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: digest of the canonical JSON of the arguments (computed, not compared)
    _arguments_hash: str = field(default="", init=False, repr=False, compare=False)
    #: bytes of that canonical JSON (what a message and a row carry)
    _arguments_size: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        validation.identifier("type", self.type)
        for name in _TASK_INSTANTS:
            check_aware(name, getattr(self, name))
        for name in _TASK_DURATIONS:
            check_duration(name, getattr(self, name))
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "kwargs", dict(self.kwargs))
        object.__setattr__(self, "schedule_kind", ScheduleKind(self.schedule_kind))
        object.__setattr__(self, "status", TaskStatus(self.status))
        object.__setattr__(self, "priority", Priority(self.priority))
        object.__setattr__(self, "catch_up", catch_up_value(self.catch_up))
        check_grace(self.catch_up_grace)
        object.__setattr__(self, "blackout_periods", tuple(self.blackout_periods))
        object.__setattr__(self, "dont_run_on_nodes", tuple(self.dont_run_on_nodes))
        if any(not isinstance(k, str) for k in self.kwargs):
            raise InvalidInput("kwargs", "keyword argument names must be strings")
        try:
            text = canonical_json({"args": list(self.args), "kwargs": self.kwargs})
        except (TypeError, ValueError) as exc:
            raise InvalidInput("arguments", f"must be JSON-serialisable: {_unjson(exc)}") from None
        if "\\u0000" in text:  # how JSON writes NUL (rare: then look closer)
            validation.storable("args", self.args)
            validation.storable("kwargs", self.kwargs)
        try:
            encoded = text.encode()
        except UnicodeEncodeError:  # a lone surrogate
            validation.storable("args", self.args)
            validation.storable("kwargs", self.kwargs)
            raise
        object.__setattr__(self, "_arguments_hash", hashlib.sha256(encoded).hexdigest())
        object.__setattr__(self, "_arguments_size", len(encoded))
        if self.key is not None and not (isinstance(self.key, str) and 0 < len(self.key) <= 500):
            raise InvalidInput("key", "must be a non-empty string of at most 500 characters")
        validation.storable("key", self.key)
        validation.storable("dont_run_on_nodes", self.dont_run_on_nodes)
        validation.zone("tz", self.tz)
        if self.retries_left < 0:
            raise InvalidInput("retries_left", f"{self.retries_left} is negative")
        self._check_schedule()

    @classmethod
    def stored(cls, values: Mapping[str, Any], *, arguments_hash: str) -> Task:
        """A task read back from the store, built without checking again
        what was checked when it was written (every field, given by name in
        ``values``; ``args`` a tuple, ``kwargs`` a dict, the JSON arrays as
        tuples): reading a page of tasks cost three times more in those
        checks than in the database. The size of the arguments is measured
        when asked for."""
        task = object.__new__(cls)
        task.__dict__.update(values)  # (frozen: no __setattr__ per field)
        put = object.__setattr__
        put(task, "schedule_kind", ScheduleKind(task.schedule_kind))
        put(task, "status", TaskStatus(task.status))
        put(task, "priority", Priority(task.priority))
        if task.catch_up is not None:
            put(task, "catch_up", CatchUp(task.catch_up))
        put(task, "_arguments_hash", arguments_hash)
        put(task, "_arguments_size", -1)
        return task

    def _check_schedule(self) -> None:
        kind = self.schedule_kind
        for name in _SCHEDULE_REQUIRED[kind]:
            if getattr(self, name) is None:
                raise InvalidInput(name, f"is required for {kind} tasks")
        for name in SCHEDULE_PARAMETERS:
            if name not in SCHEDULE_ALLOWED[kind] and getattr(self, name) is not None:
                raise InvalidInput(name, f"does not apply to {kind} tasks")
        for name in POSITIVE_TASK_DURATIONS:
            value = getattr(self, name)
            if value is not None and value <= timedelta(0):
                raise InvalidInput(name, f"{value} must be longer than zero")
        if self.cron is not None:
            validation.cron_expression("cron", self.cron)

    @property
    def policy(self) -> Policy:
        return Policy.ONESHOT if self.schedule_kind is ScheduleKind.ONESHOT else Policy.RECURRING

    @property
    def arguments(self) -> dict[str, Any]:
        return {"args": list(self.args), "kwargs": dict(self.kwargs)}

    @property
    def arguments_hash(self) -> str:
        return self._arguments_hash

    def check_arguments_depth(self, limit: int = MAX_JSON_DEPTH) -> None:
        """Refuse arguments nested more than ``limit`` levels deep: every
        reader (JSON answers, the worker's decoding) would have to walk them."""
        for name, value in (("args", self.args), ("kwargs", self.kwargs)):
            if validation.too_deep(value, limit):
                raise InvalidInput(name, f"nests lists and objects more than {limit} levels deep")

    def check_arguments_size(self, limit: int | None) -> None:
        """Refuse arguments whose JSON is longer than ``limit`` bytes (the
        ``max_argument_bytes`` setting; ``None``: no limit)."""
        if self._arguments_size < 0:  # a stored task: measured now
            size = len(canonical_json(self.arguments).encode())
            object.__setattr__(self, "_arguments_size", size)
        if limit is not None and self._arguments_size > limit:
            raise InvalidInput(
                "arguments",
                f"{self._arguments_size:,} bytes of JSON, more than the limit of {limit:,} "
                "(setting max_argument_bytes); store large data elsewhere and pass a "
                "reference (a URL, an id)",
            )

    @property
    def is_running(self) -> bool:
        return self.owner_started_at is not None

    def definition(self) -> dict[str, Any]:
        """What a client chose (not what the scheduler computed): used to tell
        a repeated creation from a conflicting one."""
        return {
            "type": self.type,
            "arguments": canonical_json(self.arguments),
            "schedule_kind": self.schedule_kind,
            "priority": self.priority,
            "period": self.period,
            "cooldown": self.cooldown,
            "cron": self.cron,
            "cron_max_duration": self.cron_max_duration,
            "max_delay": self.max_delay,
            "catch_up": self.catch_up,
            "catch_up_grace": self.catch_up_grace,
            "tz": self.tz,
            "blackout_periods": self.blackout_periods,
            "dont_run_on_nodes": self.dont_run_on_nodes,
        }

    def updated(self, **changes: Any) -> Self:
        """A copy with ``changes``, checked as at creation. A change that
        leaves the arguments, the type, the key, the zone, the nodes, the
        blackout windows and the cron expression alone (the policy's: times,
        statistics, status, owner) is checked alone, the rest carried over
        (this task was checked already): the listener updates tasks for
        every outcome, and checking every field each time was most of that
        cost. The schedule is checked again when its kind or one of its
        parameters changes."""
        if not _TASK_REBUILT.isdisjoint(changes):
            return replace(self, **changes)
        task = object.__new__(type(self))
        task.__dict__.update(self.__dict__)
        put = object.__setattr__
        for name, value in changes.items():
            check = _TASK_CHECKS.get(name)
            if check is None:
                raise TypeError(f"Task has no field {name!r} that can be changed")
            put(task, name, value if check is _unchecked else check(name, value))
        if not _TASK_SCHEDULE_FIELDS.isdisjoint(changes):
            task._check_schedule()
        return task


def _unchecked(name: str, value: Any) -> Any:
    return value


def _instant(name: str, value: Any) -> Any:
    check_aware(name, value)
    return value


def _duration(name: str, value: Any) -> Any:
    check_duration(name, value)
    return value


def _grace(name: str, value: Any) -> Any:
    check_grace(value)
    _duration(name, value)
    return value


def _retries_left(name: str, value: Any) -> Any:
    if value < 0:
        raise InvalidInput("retries_left", f"{value} is negative")
    return value


#: the owner fields of a task no run holds (the lease's and the start
#: guard's): what an ended, stolen or yielded run leaves behind
OWNER_CLEARED: Mapping[str, None] = MappingProxyType(
    dict.fromkeys(
        (
            "owner_node",
            "owner_name",
            "owner_tag",
            "owner_started_at",
            "owner_last_ping_at",
            "steal_start_at",
        )
    )
)

_TASK_INSTANTS = tuple(f.name for f in fields(Task) if f.type in ("datetime", "datetime | None"))
_TASK_DURATIONS = tuple(f.name for f in fields(Task) if f.type == "timedelta | None")
#: changes :meth:`Task.updated` builds a new task for, checked in full
_TASK_REBUILT = frozenset(
    {"args", "kwargs", "type", "key", "tz", "dont_run_on_nodes", "blackout_periods", "cron"}
)
#: the fields a change may name
_TASK_CHANGEABLE = frozenset(f.name for f in fields(Task) if f.init)
#: the fields whose change checks the schedule again (:meth:`Task._check_schedule`)
_TASK_SCHEDULE_FIELDS = frozenset({"schedule_kind", *SCHEDULE_PARAMETERS, *POSITIVE_TASK_DURATIONS})
#: how :meth:`Task.updated` checks (and converts) a changed field's value, as
#: ``__post_init__`` does
_TASK_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    **dict.fromkeys(_TASK_CHANGEABLE, _unchecked),
    **dict.fromkeys(_TASK_INSTANTS, _instant),
    **dict.fromkeys(_TASK_DURATIONS, _duration),
    "schedule_kind": lambda _, value: ScheduleKind(value),
    "status": lambda _, value: TaskStatus(value),
    "priority": lambda _, value: Priority(value),
    "catch_up": lambda _, value: catch_up_value(value),
    "catch_up_grace": _grace,
    "retries_left": _retries_left,
}
