"""A Celery app's ``beat_schedule``, read as the tasks it stands for.

Each entry (``{"task": NAME, "schedule": ..., "args": ..., "kwargs": ...,
"options": {...}}``) becomes a :class:`BeatEntry`: the Celery task, the
queue Celery would route it to, its arguments, and one of our schedule
kinds:

* ``crontab(...)`` → ``cron``, its fields written as a 5-field cron
  expression read in the app's time zone (``timezone``, UTC by default).
  Celery requires *both* a restricted ``day_of_month`` and a restricted
  ``day_of_week`` to match while cron runs on *either*: such an entry is
  refused rather than run on other days;
* ``schedule(run_every=...)``, a ``timedelta`` or a number of seconds →
  ``periodic`` with that period (the importer gives it a cooldown: see
  :data:`COOLDOWN_SHARE`);
* ``solar(...)`` and any other schedule class → refused with the reason.

Options: ``queue`` chooses the queue (else Celery's own routing:
``task_routes``, then ``task_default_queue``); the others are not
translated and each gives a warning naming the entry and the option.

Pure: nothing here reads the database or the clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from celery.schedules import crontab, schedule, solar

from ..domain import validation
from ..domain.exceptions import InvalidInput
from ..domain.model import ScheduleKind, canonical_json
from ..policy.times import fmt_duration
from .report import KEY_PREFIX

#: an imported periodic task may start again this share of its period after
#: its last good run ended: a run that takes less than the rest of the
#: period starts about once per period (beat's ``run_every`` counts from the
#: last send; ours from the last good end, see DESIGN.md §3), never twice
#: within 90 % of it, and before its staleness bound
COOLDOWN_SHARE = 0.9
#: the keys a beat_schedule entry may have (celery.beat.ScheduleEntry's)
ENTRY_KEYS = frozenset({"task", "schedule", "args", "kwargs", "options", "relative"})
#: options not translated, and why (any other option: "not translated")
OPTION_NOTES = {
    "priority": "Celery's numeric priorities depend on the broker (RabbitMQ serves the "
    "highest first, Redis the lowest); swh tasks have the classes high, normal and low: "
    "the task keeps normal",
    "expires": "a late run still runs (for a cron task, cron_max_duration bounds the lateness "
    "the condition accepts)",
    "exchange": "swh publishes to the task type's queue",
    "routing_key": "swh publishes to the task type's queue",
    "countdown": "swh starts a run when its schedule says",
    "eta": "swh starts a run when its schedule says",
    "time_limit": "set max_allowed_duration on the task type instead",
    "soft_time_limit": "set max_expected_duration on the task type instead",
}

#: (lowest, highest) value of each crontab field, in cron's order
_CRON_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day_of_month", 1, 31),
    ("month_of_year", 1, 12),
    ("day_of_week", 0, 6),
)


def entry_key(name: str) -> str:
    """The task key of the entry called ``name``."""
    return f"{KEY_PREFIX}{name}"


def cooldown_for(period: timedelta) -> timedelta:
    """The cooldown the importer gives a task of this period."""
    return period * COOLDOWN_SHARE


def span(value: timedelta) -> str:
    """A duration for people, keeping a fraction of a second (``4.5s``, ``1h05m``)."""
    seconds = value.total_seconds()
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:g}s"
    return fmt_duration(value)


@dataclass(frozen=True)
class BeatEntry:
    """One beat_schedule entry, translated."""

    name: str
    #: the Celery task name (a task type's ``backend_name``)
    task: str
    #: the queue Celery would send it to (a task type's ``effective_queue``)
    queue: str
    kind: ScheduleKind
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    period: timedelta | None = None
    cron: str | None = None
    tz: str = "UTC"
    #: options (or settings) not translated, each naming the entry
    warnings: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return entry_key(self.name)

    @property
    def cooldown(self) -> timedelta | None:
        return None if self.period is None else cooldown_for(self.period)

    def describe(self) -> str:
        """``every 5s`` or ``cron '*/15 9-17 * * 1-5' (Europe/Paris)``."""
        if self.kind is ScheduleKind.PERIODIC:
            assert self.period is not None
            return f"every {span(self.period)}"
        return f"cron {self.cron!r} ({self.tz})"


def _compress(values: Iterable[int], low: int, high: int) -> str:
    """A set of field values as cron text: ``*``, ``*/N``, ``A-B/N``, or
    ranges and single values separated by commas."""
    chosen = sorted(set(values))
    if chosen == list(range(low, high + 1)):
        return "*"
    if len(chosen) >= 3:
        step = chosen[1] - chosen[0]
        if chosen == list(range(chosen[0], chosen[-1] + 1, step)) and step > 1:
            if chosen[0] == low and chosen[-1] + step > high:
                return f"*/{step}"
            return f"{chosen[0]}-{chosen[-1]}/{step}"
    parts: list[str] = []
    start = previous = chosen[0]
    for value in [*chosen[1:], None]:
        if value is not None and value == previous + 1:
            previous = value
            continue
        if previous - start >= 2:
            parts.append(f"{start}-{previous}")
        else:
            parts.extend(str(v) for v in range(start, previous + 1))
        if value is not None:
            start = previous = value
    return ",".join(parts)


def cron_of(schedule_: crontab) -> str:
    """The cron expression of a Celery ``crontab``; :class:`ValueError` with
    the reason when cron cannot say the same."""
    texts = {name: _compress(getattr(schedule_, name), lo, hi) for name, lo, hi in _CRON_FIELDS}
    if texts["day_of_month"] != "*" and texts["day_of_week"] != "*":
        raise ValueError(
            f"crontab(day_of_month={schedule_._orig_day_of_month!r}, "
            f"day_of_week={schedule_._orig_day_of_week!r}) fires on days matching both; "
            "a cron expression fires on days matching either: split it into two entries "
            "or restrict one field only"
        )
    return " ".join(texts[name] for name, _, _ in _CRON_FIELDS)


def _period_of(value: Any) -> timedelta | None:
    """The period of a ``timedelta``, a number of seconds or an exact
    ``schedule``; ``None`` for anything else."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    if type(value) is schedule:
        run_every: timedelta = value.run_every
        return run_every
    return None


def _jsonable(field_name: str, value: Any) -> Any:
    """``value`` as the store will give it back (tuples as lists...)."""
    try:
        return json.loads(canonical_json(value))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(field_name, f"must be JSON-serialisable: {exc}") from None


def translate_entry(
    name: Any,
    fields: Any,
    *,
    tz: str,
    route: Callable[[str, Mapping[str, Any]], str],
) -> BeatEntry:
    """The :class:`BeatEntry` of the beat_schedule entry ``name``.

    ``tz`` is the app's time zone, ``route(task, options)`` the queue
    Celery sends ``task`` to with these options. Raises
    :class:`InvalidInput` whose field names the entry (and its part)."""
    if not isinstance(name, str) or not name:
        raise InvalidInput("beat_schedule", f"entry name {name!r} is not a non-empty string")
    where = f"beat_schedule[{name!r}]"
    if not isinstance(fields, Mapping):
        raise InvalidInput(where, f"must be a mapping with 'task' and 'schedule', not {fields!r}")
    unknown = sorted(set(fields) - ENTRY_KEYS)
    if unknown:
        raise InvalidInput(
            f"{where}.{unknown[0]}", f"unknown key; one of {', '.join(sorted(ENTRY_KEYS))}"
        )
    task = fields.get("task")
    if not isinstance(task, str) or not task:
        raise InvalidInput(f"{where}.task", "the name of a Celery task is required")
    warnings: list[str] = []
    value = fields.get("schedule")
    period, cron = _period_of(value), None
    if isinstance(value, solar):
        raise InvalidInput(
            f"{where}.schedule",
            f"solar schedules ({value.event} at {value.lat}, {value.lon}) are not supported: "
            "swh has no sunrise/sunset schedule; use a crontab at the times you need",
        )
    if period is not None:
        if period <= timedelta(0):
            raise InvalidInput(f"{where}.schedule", f"the period {period} must be longer than zero")
        kind = ScheduleKind.PERIODIC
        if getattr(value, "relative", False) or fields.get("relative"):
            warnings.append(
                f"entry {name!r}: relative=True is not translated: the task runs one "
                "period after its last run, not on multiples of its period"
            )
    elif type(value) is crontab:
        kind = ScheduleKind.CRON
        try:
            cron = validation.cron_expression(f"{where}.schedule", cron_of(value))
        except ValueError as exc:
            raise InvalidInput(f"{where}.schedule", str(exc)) from None
    elif value is None:
        raise InvalidInput(f"{where}.schedule", "is required (a crontab, a timedelta, seconds)")
    else:
        raise InvalidInput(
            f"{where}.schedule",
            f"{type(value).__name__} schedules are not supported: use crontab(...), "
            "schedule(run_every=...), a timedelta or a number of seconds",
        )
    args = fields.get("args") or ()
    if isinstance(args, str | bytes) or not isinstance(args, list | tuple):
        raise InvalidInput(f"{where}.args", f"must be a list or a tuple, not {args!r}")
    kwargs = fields.get("kwargs") or {}
    if not isinstance(kwargs, Mapping) or any(not isinstance(k, str) for k in kwargs):
        raise InvalidInput(f"{where}.kwargs", f"must be a mapping of names, not {kwargs!r}")
    options = fields.get("options") or {}
    if not isinstance(options, Mapping):
        raise InvalidInput(f"{where}.options", f"must be a mapping, not {options!r}")
    for option in sorted(set(options) - {"queue"}):
        note = OPTION_NOTES.get(option, "swh has no such setting")
        warnings.append(f"entry {name!r}: option {option!r} is not translated: {note}")
    try:
        queue = route(task, options)
    except Exception as exc:  # Celery's router: a bad task_routes or queue option
        raise InvalidInput(f"{where}.options.queue", f"Celery cannot route it: {exc}") from None
    validation.identifier(f"{where}.options.queue", queue)
    return BeatEntry(
        name=name,
        task=task,
        queue=queue,
        kind=kind,
        args=tuple(_jsonable(f"{where}.args", list(args))),
        kwargs=_jsonable(f"{where}.kwargs", dict(kwargs)),
        period=period,
        cron=cron,
        tz=tz,
        warnings=tuple(warnings),
    )


def translate_schedule(
    beat_schedule: Any,
    *,
    tz: str,
    route: Callable[[str, Mapping[str, Any]], str],
    exclude: Iterable[str] = (),
    refused: list[InvalidInput] | None = None,
) -> list[BeatEntry]:
    """Every entry of ``beat_schedule`` but the ``exclude``d ones, in
    name order; one :class:`InvalidInput` listing every entry refused, one
    per line, or, when a ``refused`` list is given, the entries that can be
    taken (the others' errors appended to it)."""
    if beat_schedule is None:
        return []
    if not isinstance(beat_schedule, Mapping):
        raise InvalidInput("beat_schedule", f"must be a mapping of entries, not {beat_schedule!r}")
    validation.zone("timezone", tz)
    left_out = set(exclude)
    entries: list[BeatEntry] = []
    errors: list[InvalidInput] = []
    for name in sorted(beat_schedule, key=str):
        if name in left_out:
            continue
        try:
            entries.append(translate_entry(name, beat_schedule[name], tz=tz, route=route))
        except InvalidInput as error:
            errors.append(error)
    if refused is not None:
        refused.extend(errors)
        return entries
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InvalidInput(
            "beat_schedule",
            f"{len(errors)} entries refused:\n" + "\n".join(f"  {e}" for e in errors),
        )
    return entries


def app_time_zone(app: Any) -> str:
    """The IANA name of the zone a Celery app reads its crontabs in."""
    zone = app.timezone
    name = getattr(zone, "key", None) or str(zone)
    try:
        validation.zone("timezone", name)
    except InvalidInput:
        raise InvalidInput(
            "timezone",
            f"the app's time zone {name!r} is not an IANA zone name: set the Celery "
            "setting timezone (example: Europe/Paris)",
        ) from None
    return name


def celery_route(app: Any) -> Callable[[str, Mapping[str, Any]], str]:
    """``route(task, options)``: the name of the queue ``app`` sends ``task`` to."""

    def route(task: str, options: Mapping[str, Any]) -> str:
        chosen = app.amqp.router.route(dict(options), task, (), {})
        queue = chosen.get("queue")
        return str(getattr(queue, "name", queue))

    return route


def app_entries(
    app: Any, *, exclude: Iterable[str] = (), refused: list[InvalidInput] | None = None
) -> list[BeatEntry]:
    """The translated ``beat_schedule`` of a Celery app (its
    ``beat_cron_starting_deadline``, when set, is a warning of each cron
    entry); ``refused`` as :func:`translate_schedule` takes it."""
    entries = translate_schedule(
        app.conf.beat_schedule,
        tz=app_time_zone(app),
        route=celery_route(app),
        exclude=exclude,
        refused=refused,
    )
    deadline = app.conf.get("beat_cron_starting_deadline")
    if deadline is None:
        return entries
    note = (
        f"beat_cron_starting_deadline={deadline} is not translated: a firing missed while "
        "nothing ran still runs once, late"
    )
    return [
        replace(e, warnings=(*e.warnings, f"entry {e.name!r}: {note}"))
        if e.kind is ScheduleKind.CRON
        else e
        for e in entries
    ]
