"""Request bodies of the HTTP API (pydantic), and the values they hold.

Each field's schema in the OpenAPI document says what the server accepts:
its JSON type, bounds, and for text the pattern it must match (names,
durations, instants, cron expressions, times of day). The patterns are
checked here, with a message naming the field, so the document and the
server agree both ways: a request the document allows is not refused for
its shape, and one it forbids is. What a value then means (a duration's
length, a cron expression, a time zone, how fields go together) is checked
by :mod:`..builders` and :mod:`..editing`, the same code as the command
line's and the importer's. What no schema can say stays theirs: whether a
time zone name is known, whether a cron expression ever fires, a task type
or a key the store holds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    StrictBool,
    StrictInt,
    StrictStr,
)
from pydantic_core import PydanticCustomError, core_schema

from ..domain.validation import MAX_DURATION

#: most tasks one ``POST /tasks`` creates
MAX_TASKS_PER_REQUEST = 1000
#: the largest integer the database stores in a 32-bit column (counts)
MAX_COUNT = 2**31 - 1
#: the largest id a client may name: the largest integer every JSON reader
#: holds exactly (a double's), far below the database's 64 bits
MAX_ID = 2**53 - 1
#: the longest duration, in seconds (a century)
LONGEST = MAX_DURATION.total_seconds()
#: the shortest duration longer than zero: a microsecond (half of one rounds to 0)
SHORTEST = 5e-7


def _shown(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:57] + "...")


def _refuse(problem: str, value: str) -> PydanticCustomError:
    return PydanticCustomError("value_error", "{value} " + problem, {"value": _shown(value)})


@lru_cache(maxsize=64)
def ecma(pattern: str) -> re.Pattern[str]:
    """``pattern`` read as JSON Schema reads it (ECMA 262): a closing ``$``
    is the end of the text (Python's also matches before a final newline)."""
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern)


def _one_of(*alternatives: str) -> str:
    return "(" + "|".join(alternatives) + ")"


@dataclass(frozen=True)
class Matching:
    """Text matching ``pattern`` (JSON Schema's rule: found in the text,
    :func:`ecma`), refused with ``problem`` otherwise, of
    ``min_length`` to ``max_length`` characters; the document shows all of
    it, and ``examples``."""

    pattern: str
    problem: str
    min_length: int = 0
    max_length: int | None = None
    examples: tuple[str, ...] = ()

    def check(self, value: str) -> str:
        if len(value) < self.min_length:
            raise PydanticCustomError(
                "value_error", "must be at least {n} characters long", {"n": self.min_length}
            )
        if self.max_length is not None and len(value) > self.max_length:
            raise PydanticCustomError(
                "value_error", "must be at most {n} characters long", {"n": self.max_length}
            )
        if ecma(self.pattern).search(value) is None:
            raise _refuse(self.problem, value)
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: GetJsonSchemaHandler) -> Any:
        document: dict[str, Any] = handler(schema)  # with a parameter's own bounds
        document["pattern"] = self.pattern
        if self.min_length:
            document["minLength"] = self.min_length
        if self.max_length is not None:
            document["maxLength"] = self.max_length
        if self.examples:
            document["examples"] = list(self.examples)
        return document


# --- names and free text --------------------------------------------------

#: text PostgreSQL can store: no NUL character
NO_NUL = r"^[^\x00]*$"
NUL_PROBLEM = "contains a NUL character (\\u0000), which cannot be stored"
Text = Annotated[StrictStr, Matching(NO_NUL, NUL_PROBLEM)]
#: a path or query parameter's text (parameters are text: not strict)
NoNul = Annotated[str, Matching(NO_NUL, "contains a NUL character (%00)")]
#: a task type, a backend or a queue name (:func:`..validation.identifier`)
Identifier = Annotated[
    StrictStr,
    Matching(
        r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$",
        "is not a valid name: use letters, digits, '_', '.', ':' or '-' (at most 200 characters)",
        examples=("load-git",),
    ),
]

# --- durations -------------------------------------------------------------


def _count(digits: int, positive: bool) -> str:
    """A whole number of at most ``digits`` digits (with ``positive``: not 0)."""
    more = f"[0-9]{{0,{digits - 1}}}"
    return f"[1-9]{more}" if positive else f"(0|[1-9]{more})"


def _in_order(parts: list[str], separator: str) -> str:
    """One or more of ``parts``, in their order, each at most once."""
    starts = []
    for index, part in enumerate(parts):
        rest = "".join(f"({separator}{later})?" for later in parts[index + 1 :])
        starts.append(part + rest)
    return _one_of(*starts)


@lru_cache(maxsize=2)
def duration_pattern(positive: bool) -> str:
    """The duration texts the API reads: seconds (``"90"``), units in
    decreasing order (``"5 min"``, ``"1h30m"``, ``"3 days"``, ``"2 weeks"``)
    or ISO 8601 (``"PT5M"``, ``"P1DT2H"``); with ``positive``, none is 0.
    Each number has few enough digits that every match is within a century."""
    if positive:
        seconds = r"([1-9][0-9]{0,8}(\.[0-9]{1,6})?|0\.[0-9]{0,5}[1-9])"
    else:
        seconds = r"(0|[1-9][0-9]{0,8})(\.[0-9]{1,6})?"
    units = [
        _count(3, positive) + " ?(w|weeks?)",
        _count(4, positive) + " ?(d|days?)",
        _count(5, positive) + " ?(h|hours?)",
        _count(7, positive) + " ?(m|mins?|minutes?)",
        _count(8, positive) + " ?(s|secs?|seconds?)",
    ]
    clock = [_count(5, positive) + "H", _count(7, positive) + "M", _count(8, positive) + "S"]
    time_part = "T" + _in_order(clock, "")
    iso = "P" + _one_of(_count(4, positive) + f"D({time_part})?", time_part)
    return "^" + _one_of(seconds, _in_order(units, " ?"), iso) + "$"


@dataclass(frozen=True)
class DurationRule:
    """Seconds (a JSON number) or a duration text matching
    :func:`duration_pattern`. A number's bounds are the builders' to check
    (:func:`..validation.parse_duration`: the same message as elsewhere);
    the document shows them."""

    positive: bool

    def check(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise PydanticCustomError(
                "value_error", "must be seconds (a number) or a duration text ('5 min')"
            )
        if isinstance(value, str) and ecma(duration_pattern(self.positive)).search(value) is None:
            smallest = "longer than zero" if self.positive else "0 or more"
            raise _refuse(
                "is not a duration: give seconds (a number, or text: '90'), units "
                "('5 min', '1h30m', '3 days', '2 weeks') or ISO 8601 ('PT5M', 'P1DT2H'), "
                f"{smallest}, within {MAX_DURATION.days:,} days",
                value,
            )
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return core_schema.no_info_plain_validator_function(self.check)

    def __get_pydantic_json_schema__(self, schema: Any, handler: GetJsonSchemaHandler) -> Any:
        number: dict[str, Any] = {"type": "number", "maximum": LONGEST}
        number.update({"exclusiveMinimum": SHORTEST} if self.positive else {"minimum": 0})
        text = {"type": "string", "pattern": duration_pattern(self.positive)}
        return {"anyOf": [number, text], "examples": [90, "5 min", "1h30m", "PT5M"]}


#: seconds (a number) or text, 0 or more
Duration = Annotated[float | str, DurationRule(positive=False)]
#: seconds (a number) or text, longer than zero
PositiveDuration = Annotated[float | str, DurationRule(positive=True)]

# --- instants and times of day --------------------------------------------

_YEAR = r"(190[1-9]|19[1-9][0-9]|[2-7][0-9]{3}|8[0-8][0-9]{2})"
_LEAP_YEAR = r"((19|[2-7][0-9]|8[0-8])(0[48]|[2468][048]|[13579][26])|([2468][048]|[357][26])00)"
_DATE = _one_of(
    _YEAR
    + "-"
    + _one_of(
        r"(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])",
        r"(0[13-9]|1[0-2])-(29|30)",
        r"(0[13578]|1[02])-31",
    ),
    _LEAP_YEAR + "-02-29",
)
_HOUR_MINUTE = r"([01][0-9]|2[0-3]):[0-5][0-9]"
_OFFSET = r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#: the years an instant may name (the store keeps 1900-8999, whatever the offset)
INSTANT_YEARS = (1901, 8899)
#: an ISO 8601 instant: a date, else a date and a time, with or without an
#: offset (without: in the task's time zone), or ``now``
INSTANT = (
    "^"
    + _one_of(
        _DATE + f"(T{_HOUR_MINUTE}(:[0-5][0-9](\\.[0-9]{{1,6}})?)?{_OFFSET}?)?",
        "now",
    )
    + "$"
)
#: an instant of a job: a date and a time in whole seconds, with its offset
ZONED_INSTANT = f"^{_DATE}T{_HOUR_MINUTE}(:[0-5][0-9])?{_OFFSET}$"
_YEARS = f"in the years {INSTANT_YEARS[0]}-{INSTANT_YEARS[1]}"
Instant = Annotated[
    StrictStr,
    Matching(
        INSTANT,
        f"is not an ISO 8601 date-time {_YEARS} (example: 2026-01-31T14:00:00Z)",
        examples=("2026-01-31T14:00:00Z",),
    ),
]
ZonedInstant = Annotated[
    StrictStr,
    Matching(
        ZONED_INSTANT,
        f"is not an ISO 8601 instant {_YEARS} in whole seconds with its offset "
        "(example: 2026-01-31T14:00:00Z)",
        examples=("2026-01-31T14:00:00Z",),
    ),
]
TimeOfDay = Annotated[
    StrictStr,
    Matching(
        f"^({_HOUR_MINUTE}(:[0-5][0-9](\\.[0-9]{{1,6}})?)?|24:00(:00)?)$",
        "is not a time of day HH:MM or HH:MM:SS (example: 23:30)",
        examples=("23:00",),
    ),
]

# --- cron expressions ------------------------------------------------------


def _cron_field(value: str) -> str:
    step = "/[1-9][0-9]?"
    item = _one_of(rf"\*({step})?", f"{value}(-{value}({step})?)?")
    return f"{item}(,{item})*"


_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_DAYS = "sun|mon|tue|wed|thu|fri|sat"
#: five fields (minute hour day-of-month month day-of-week), each a list of
#: ``*``, values and ranges, with steps; months and days also by name
CRON = (
    "^"
    + " ".join(
        _cron_field(value)
        for value in (
            "[1-5]?[0-9]",
            "(1?[0-9]|2[0-3])",
            "([1-9]|[12][0-9]|3[01])",
            _one_of("[1-9]|1[0-2]", _MONTHS, _MONTHS.upper()),
            _one_of("[0-7]", _DAYS, _DAYS.upper()),
        )
    )
    + "$"
)
Cron = Annotated[
    StrictStr,
    Matching(
        CRON,
        "is not a cron expression of 5 fields: minute hour day-of-month month day-of-week, "
        "each *, a value, a range or a list, with an optional /step (example: '0 3 * * *')",
        examples=("0 3 * * *", "*/15 8-18 * * mon-fri"),
    ),
]

# --- numbers ---------------------------------------------------------------


def _whole(value: Any) -> Any:
    """A JSON number without a fraction (``5.0``) is the integer JSON Schema
    says it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: an integer (``5.0`` too)
Whole = Annotated[StrictInt, BeforeValidator(_whole)]
#: a count the database stores in 32 bits
Count = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT), BeforeValidator(_whole)]
#: a task's id
TaskIdIn = Annotated[StrictInt, Field(ge=1, le=MAX_ID), BeforeValidator(_whole)]
#: a finite JSON number (an integer too)
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
#: a task type's backoff_factor: more than 1
Factor = Annotated[Number, Field(gt=1)]
#: a task type's retry_growth: 1 or more
Growth = Annotated[Number, Field(ge=1)]

# --- bodies ------------------------------------------------------------------


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def given(self) -> dict[str, Any]:
        """The fields the client sent."""
        return self.model_dump(exclude_unset=True)


class BlackoutIn(Body):
    start: TimeOfDay
    end: TimeOfDay


Nodes = list[Text]
Priority = Literal["high", "normal", "low"]
CatchUp = Literal["latest", "skip"]
#: a time zone: whether it is a known IANA name is the server's check
Zone = Annotated[StrictStr, Matching(NO_NUL, NUL_PROBLEM, min_length=1, examples=("Europe/Paris",))]
#: a task's client key
Key = Annotated[StrictStr, Matching(NO_NUL, NUL_PROBLEM, min_length=1, max_length=500)]


class TaskTypeIn(Body):
    """A new task type (as ``swh scheduler task-type add``)."""

    type: Identifier
    backend_name: Identifier = Field(examples=["swh.loader.git"])
    description: Text | None = None
    queue: Identifier | None = None
    default_interval: PositiveDuration | None = None
    min_interval: PositiveDuration | None = None
    max_interval: PositiveDuration | None = None
    backoff_factor: Factor | None = None
    max_queue_length: Count | None = None
    num_retries: Count | None = None
    retry_delay: Duration | None = None
    retry_growth: Growth | None = None
    retry_cap: Duration | None = None
    retry_jitter: Duration | None = None
    max_expected_duration: PositiveDuration | None = None
    max_allowed_duration: PositiveDuration | None = None
    uses_lease: StrictBool | None = None
    catch_up: CatchUp | None = Field(
        default=None, description="missed firings: run the latest once (default) or skip them"
    )
    catch_up_grace: PositiveDuration | None = Field(
        default=None, description="how late a firing may still run with skip (default 5 min)"
    )


#: which schedule parameters each schedule kind takes (``interval`` is the
#: adaptive one's; the others are refused: :data:`..model.SCHEDULE_ALLOWED`)
_KIND_TAKES = {
    "oneshot": ("max_delay",),
    "periodic": ("period", "cooldown"),
    "cron": ("cron", "cron_max_duration"),
    "adaptive": ("interval",),
}
_KIND_NEEDS = {"periodic": "period", "cron": "cron"}
_ABSENT: dict[str, Any] = {"type": "null"}
_PRESENT: dict[str, Any] = {"type": ["number", "string"]}


def _schedule_cases(schema: dict[str, Any]) -> None:
    """How a task's fields go together, as JSON Schema: the schedule kind is
    ``kind``, else ``oneshot`` by ``policy``, else ``cron`` with a cron,
    else ``periodic`` with a period, else ``adaptive``
    (:func:`..builders.schedule_kind`); each kind takes its own parameters
    and needs its main one."""
    every = {name for names in _KIND_TAKES.values() for name in names}
    recurring = {"enum": ["recurring", None]}
    deduced = {
        "oneshot": {"policy": {"const": "oneshot"}},
        "cron": {"policy": recurring, "cron": _PRESENT},
        "periodic": {"policy": recurring, "cron": _ABSENT, "period": _PRESENT},
        "adaptive": {"policy": recurring, "cron": _ABSENT, "period": _ABSENT},
    }
    cases = []
    for kind, takes in _KIND_TAKES.items():
        rules = dict.fromkeys(sorted(every - set(takes)), _ABSENT)
        needs = _KIND_NEEDS.get(kind)
        explicit = {**rules, "kind": {"const": kind}} | ({needs: _PRESENT} if needs else {})
        cases.append({"properties": explicit, "required": ["kind", *([needs] if needs else [])]})
        implicit = {**rules, "kind": _ABSENT, **deduced[kind]}
        required = [name for name, rule in deduced[kind].items() if rule is _PRESENT]
        required += ["policy"] if kind == "oneshot" else []
        cases.append({"properties": implicit, "required": required})
    schema["anyOf"] = cases


class TaskIn(Body):
    """A new task (as ``swh scheduler task add``); the schedule kind comes
    from ``kind``, else from the parameters given (``cron``, ``period``),
    else from ``policy`` (recurring: adaptive). Each kind takes its own
    parameters (oneshot: max_delay; periodic: period, cooldown; cron: cron,
    cron_max_duration; adaptive: interval), as the schema's ``anyOf`` says."""

    model_config = ConfigDict(json_schema_extra=_schedule_cases)

    type: Identifier
    args: list[Any] | None = None
    kwargs: dict[str, Any] | None = None
    key: Key | None = None
    policy: Literal["recurring", "oneshot"] | None = None
    kind: Literal["oneshot", "periodic", "cron", "adaptive"] | None = None
    next_run: Instant | None = Field(
        default=None,
        description="Its earliest start (can_start_by), ISO 8601 (default: now)",
    )
    interval: PositiveDuration | None = None
    period: PositiveDuration | None = None
    cooldown: Duration | None = Field(
        default=None,
        description="Periodic: pause after a good run (default: 90 % of the period less "
        "twice expected_duration; 0: as often as capacity allows)",
    )
    cron: Cron | None = None
    cron_max_duration: PositiveDuration | None = None
    max_delay: Duration | None = None
    catch_up: CatchUp | None = Field(
        default=None, description="missed firings: latest or skip (default: the type's)"
    )
    catch_up_grace: PositiveDuration | None = Field(
        default=None, description="how late a firing may run with skip (default: the type's)"
    )
    priority: Priority | None = None
    tz: Zone | None = Field(default=None, description="IANA time zone (default: UTC)")
    blackout_periods: list[BlackoutIn] | None = None
    dont_run_on_nodes: Nodes | None = None
    max_expected_duration: PositiveDuration | None = None
    max_allowed_duration: PositiveDuration | None = None
    expected_duration: Duration | None = None


class TasksIn(Body):
    tasks: list[TaskIn] = Field(min_length=1, max_length=MAX_TASKS_PER_REQUEST)


class RespawnIn(Body):
    next_run: Instant | None = Field(
        default=None,
        description="Its new earliest start (can_start_by), ISO 8601 (default: now)",
    )


# --- errors ------------------------------------------------------------------


class FieldError(BaseModel):
    """One problem of a request, where it is (``["body", "tasks", 1, "cron"]``)."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorOut(BaseModel):
    """Every error answer: a sentence, or (422) the list of problems."""

    detail: str | list[FieldError]


#: what any operation may answer besides its own success
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "a malformed request (a bad Content-Length...)"},
    401: {"model": ErrorOut, "description": "no valid bearer token"},
    403: {"model": ErrorOut, "description": "a read-only token asked to write"},
    404: {"model": ErrorOut, "description": "nothing by that name or id"},
    409: {"model": ErrorOut, "description": "a conflict: a key or name already taken"},
    413: {"model": ErrorOut, "description": "a body over the size limit"},
    422: {"model": ErrorOut, "description": "bad input: each problem with its location"},
    429: {"model": ErrorOut, "description": "past the client's request rate (see Retry-After)"},
    503: {"model": ErrorOut, "description": "the database (or broker) is not answering"},
}
