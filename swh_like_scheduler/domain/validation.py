"""Parsers and validators for user-supplied values.

Each function takes the name of the field being read so that a refusal says
exactly which field is wrong: ``interval: '3 dayz' is not a duration ...``.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import isodate
from croniter import croniter
from pytimeparse import parse as _timeparse

from .exceptions import InvalidInput

_NUMBER = re.compile(r"^\s*-?\d+(\.\d+)?\s*$")
_IDENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")


#: the instants accepted anywhere: a schedule (plus its longest duration)
#: stays far from the ends of the calendar
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
#: the longest duration accepted anywhere (a period, a delay...): a century
MAX_DURATION = timedelta(days=36_525)


def parse_duration(
    field: str, value: str | int | float | timedelta, *, positive: bool = False
) -> timedelta:
    """A non-negative duration from ``timedelta``, seconds, or text (with
    ``positive``: longer than zero, and the message for -5 says so too).

    Text may be ``"3 days"``, ``"1h30m"``, ``"12:00:00"``, Python's own
    ``"64 days, 0:00:00"`` or ISO 8601 (``"PT5M"``, ``"P1D"``).
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise InvalidInput(field, f"{value!r} is not a duration")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            raise InvalidInput(field, "a duration is required, got an empty string")
        if _NUMBER.match(text):
            seconds = float(text)
        elif text[:1] in "Pp" or text[:2] in ("-P", "-p"):
            try:
                parsed = isodate.parse_duration(text.upper())
            except (isodate.ISO8601Error, ValueError):
                raise InvalidInput(
                    field, f"{value!r} is not an ISO 8601 duration (example: PT5M)"
                ) from None
            if not isinstance(parsed, timedelta):
                raise InvalidInput(
                    field, f"{value!r} uses months or years; give days instead (P30D)"
                )
            seconds = parsed.total_seconds()
        else:
            result = _timeparse(text)
            if result is None:
                raise InvalidInput(
                    field,
                    f"{value!r} is not a duration "
                    "(examples: '90', '5 min', '1h30m', '3 days', '12:00:00', 'PT5M')",
                )
            seconds = float(result)
    else:
        raise InvalidInput(field, f"{value!r} is not a duration")
    if math.isnan(seconds):
        raise InvalidInput(field, f"{value!r} is not a duration")
    if positive and seconds <= 0:
        raise InvalidInput(field, f"{value!r} is not a duration longer than zero (as it must be)")
    if seconds < 0:
        raise InvalidInput(field, f"{value!r} is negative; a duration must be >= 0")
    if seconds > MAX_DURATION.total_seconds():
        raise InvalidInput(field, f"{value!r} is longer than {MAX_DURATION.days:,} days")
    return timedelta(seconds=seconds)


def optional_duration(field: str, value: str | int | float | timedelta | None) -> timedelta | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_duration(field, value)


def parse_datetime(field: str, value: str | datetime, tz: str = "UTC") -> datetime:
    """An aware UTC datetime; naive input is read in the zone ``tz``."""
    if isinstance(value, datetime):
        result = value
    else:
        text = value.strip()
        if text.lower() == "now":
            return datetime.now(tz=UTC)
        try:
            result = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                field, f"{value!r} is not an ISO 8601 date-time (example: 2026-01-31T14:00:00Z)"
            ) from None
    if result.tzinfo is None:
        result = result.replace(tzinfo=zone(field, tz))
    try:
        result = result.astimezone(UTC)
    except OverflowError:
        result = EARLIEST - timedelta(days=1) if result.year < 2000 else LATEST
    if not EARLIEST <= result < LATEST:
        raise InvalidInput(
            field, f"{value!r} is outside the years {EARLIEST.year}-{LATEST.year - 1}"
        )
    return result


def unstorable(value: object) -> str | None:
    """What in a string of ``value`` (a JSON-like value: strings, lists,
    mappings and their keys) no database can store: a NUL character or a
    lone surrogate (text that is not Unicode); ``None`` if nothing."""
    if isinstance(value, str):
        if "\x00" in value:
            return "contains a NUL character (\\u0000), which cannot be stored"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "contains a lone surrogate (\\ud800-\\udfff): it is not Unicode text"
        return None
    if isinstance(value, dict):
        items: list[object] = [*value.keys(), *value.values()]
        return next(filter(None, map(unstorable, items)), None)
    if isinstance(value, list | tuple):
        return next(filter(None, map(unstorable, value)), None)
    return None


def too_deep(value: object, limit: int) -> bool:
    """Whether ``value`` (a JSON-like value) nests lists and mappings more
    than ``limit`` levels deep (walked without recursion: any depth is safe
    to ask about)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def storable(field: str, value: object) -> None:
    """Refuse text PostgreSQL cannot store, in text or JSON columns (SQLite
    would store what PostgreSQL refuses: one rule for both)."""
    problem = unstorable(value)
    if problem is not None:
        raise InvalidInput(field, problem)


#: the integers a JSON document may hold: signed 64 bits, what every reader
#: takes whole (a database's bigint, a loader written in another language)
JSON_INT_MIN, JSON_INT_MAX = -(2**63), 2**63 - 1


def _json_where(path: tuple[object, ...]) -> str:
    return "".join(f"[{step!r}]" for step in path)


def _json_scalar_problem(item: object) -> str | None:
    if item is None or isinstance(item, bool):
        return None
    if isinstance(item, int):
        if JSON_INT_MIN <= item <= JSON_INT_MAX:
            return None
        return "holds an integer outside signed 64 bits (-2**63 to 2**63 - 1)"
    if isinstance(item, float):
        if math.isfinite(item):
            return None
        return f"holds {item!r}: NaN and infinities are not JSON numbers"
    if isinstance(item, str):
        return unstorable(item)
    return f"holds a {type(item).__name__}, which is not a JSON value"


def json_problem(value: object, *, depth: int) -> str | None:
    """What in ``value`` (a JSON document: mappings with text keys, lists,
    text, numbers, true, false, null) cannot be written as JSON and read
    back the same by every reader: NaN or an infinity, an integer outside
    signed 64 bits, text no database stores (:func:`unstorable`), a key
    that is not text, nesting deeper than ``depth``, a value of another
    kind; with where it is (``at ['a'][0]``). ``None``: nothing. Walked
    without recursion, so any depth is safe to ask about."""
    stack: list[tuple[object, tuple[object, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict | list | tuple):
            if len(path) >= depth:
                return f"nests lists and objects more than {depth} levels deep"
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        return f"has a key {key!r} that is not text"
                    problem = unstorable(key)
                    if problem is not None:
                        return f"has a key that {problem}"
                    stack.append((child, (*path, key)))
            else:
                stack.extend((child, (*path, index)) for index, child in enumerate(item))
            continue
        problem = _json_scalar_problem(item)
        if problem is not None:
            where = _json_where(path)
            return f"{problem} (at {where})" if where else problem
    return None


def zone(field: str, name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``Europe/Paris``)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(field, "an IANA time zone name is required (example: Europe/Paris)")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(
            field, f"{name!r} is not a known IANA time zone (example: Europe/Paris)"
        ) from None


def cron_expression(field: str, expr: str) -> str:
    """A 5-field cron expression, normalised to single spaces."""
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidInput(field, "a cron expression is required (example: '0 3 * * *')")
    storable(field, expr)
    normalised = " ".join(expr.split())
    if len(normalised.split(" ")) != 5:
        raise InvalidInput(
            field,
            f"{expr!r} must have 5 fields: minute hour day-of-month month day-of-week",
        )
    if not _valid_cron(normalised):
        raise InvalidInput(field, f"{expr!r} is not a valid cron expression")
    return normalised


@lru_cache(maxsize=4096)
def _valid_cron(expr: str) -> bool:
    # croniter parses the whole expression each time; an import repeats a few
    return bool(croniter.is_valid(expr))


def time_of_day(field: str, value: str | time) -> time:
    """A local time of day ``HH:MM`` or ``HH:MM:SS`` (``24:00`` means end of day)."""
    if isinstance(value, time):
        return value
    text = str(value).strip()
    if text in ("24:00", "24:00:00"):
        return time.max
    try:
        return time.fromisoformat(text)
    except ValueError:
        raise InvalidInput(field, f"{value!r} is not a time of day (example: 23:30)") from None


def identifier(field: str, value: str) -> str:
    """A name made of letters, digits and ``_ . : -`` (task type names, queues)."""
    if not isinstance(value, str) or not _IDENT.match(value):
        raise InvalidInput(
            field,
            f"{value!r} is not a valid name: use letters, digits, '_', '.', ':' or '-' "
            "(at most 200 characters)",
        )
    return value


def non_negative_int(field: str, value: int | str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidInput(field, f"{value!r} is not an integer") from None
    if number < 0:
        raise InvalidInput(field, f"{number} is negative; it must be >= 0")
    return number


def positive_float(field: str, value: float | str | None, *, minimum: float = 0.0) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(field, f"{value!r} is not a number") from None
    if not number > minimum or number != number or number == float("inf"):
        raise InvalidInput(field, f"{value!r} must be a finite number greater than {minimum:g}")
    return number
