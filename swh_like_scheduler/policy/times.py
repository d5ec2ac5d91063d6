"""Time helpers shared by the policy modules: zones, local wall times, durations.

Everything here is pure: instants are passed in, never read from a clock.
Instants are timezone-aware; results are aware UTC datetimes. The one
setting is the reader's zone (:func:`shown_in`): a human output that prints
instants names one zone for all of them, and the sentences written while it
is set (:func:`fmt_instant`, :func:`fmt_local`) show their instants in it.

Local wall times are mapped to instants with one rule used everywhere
(cron firings, blackout ends):

* a wall time that exists once maps to that instant;
* an *ambiguous* wall time (it occurs twice when clocks go back) maps to its
  first occurrence, unless the caller needs an instant after a given one and
  only the second occurrence qualifies;
* a *skipped* wall time (clocks jumped over it) maps to the instant the clocks
  jumped, i.e. the first real instant after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo

from ..domain.model import Task, TaskType
from ..domain.validation import zone as _parse_zone

ZERO = timedelta(0)


@lru_cache(maxsize=256)
def _zone_cached(name: str) -> ZoneInfo:
    return _parse_zone("tz", name)


def get_zone(tz: str | tzinfo) -> tzinfo:
    """The zone ``tz`` (an IANA name or a tzinfo); raises InvalidInput('tz') if unknown."""
    if isinstance(tz, str):
        return _zone_cached(tz)
    return tz


def to_utc(instant: datetime) -> datetime:
    """``instant`` (which must be aware) expressed in UTC."""
    if instant.tzinfo is UTC:  # (most are: the store reads them so)
        return instant
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{instant!r} is a naive datetime; policy functions need aware ones")
    return instant.astimezone(UTC)


def wall_time(instant: datetime, tz: str | tzinfo) -> datetime:
    """The naive local wall-clock reading of ``instant`` in ``tz``."""
    return to_utc(instant).astimezone(get_zone(tz)).replace(tzinfo=None)


def is_real_wall_time(naive: datetime, tz: str | tzinfo) -> bool:
    """Whether the wall time ``naive`` actually occurs in ``tz`` (not in a DST gap)."""
    zone = get_zone(tz)
    for fold in (0, 1):
        local = naive.replace(tzinfo=zone, fold=fold)
        if local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive:
            return True
    return False


def _gap_end(naive: datetime, zone: tzinfo) -> datetime:
    """The UTC instant at which clocks jumped over the skipped wall time ``naive``."""
    # For a skipped wall time, fold=1 reads it with the offset in force after
    # the jump (an instant before the jump) and fold=0 with the offset before
    # it (an instant after the jump). The jump lies between: bisect on seconds.
    early = naive.replace(tzinfo=zone, fold=1).astimezone(UTC)
    late = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if early > late:
        early, late = late, early
    offset_before = early.astimezone(zone).utcoffset()
    lo, hi = 0, int((late - early).total_seconds()) + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if (early + timedelta(seconds=mid)).astimezone(zone).utcoffset() == offset_before:
            lo = mid + 1
        else:
            hi = mid
    return early + timedelta(seconds=lo)


def local_to_utc(naive: datetime, tz: str | tzinfo, *, after: datetime | None = None) -> datetime:
    """The UTC instant of the local wall time ``naive`` in ``tz`` (rule in the module doc).

    With ``after``, an ambiguous wall time resolves to its first occurrence
    that is strictly later than ``after`` when there is one.
    """
    zone = get_zone(tz)
    candidates: list[datetime] = []
    for fold in (0, 1):
        local = naive.replace(tzinfo=zone, fold=fold)
        instant = local.astimezone(UTC)
        if instant.astimezone(zone).replace(tzinfo=None) == naive and instant not in candidates:
            candidates.append(instant)
    if not candidates:
        return _gap_end(naive, zone)
    candidates.sort()
    if after is not None:
        later = [c for c in candidates if c > to_utc(after)]
        if later:
            return later[0]
    return candidates[0]


def effective_average(task: Task) -> timedelta:
    """Expected run time: operator ``expected_duration`` if set, else the EWMA, else 0."""
    if task.expected_duration is not None:
        return task.expected_duration
    if task.average_good_duration is not None:
        return task.average_good_duration
    return ZERO


def measured_run_time(task: Task) -> tuple[timedelta, str] | None:
    """How long the task's runs take and where that comes from: its measured
    average (``"measured"``), else its ``expected_duration``
    (``"expected"``); ``None`` when neither is known. (The runner's claim
    reads a long run the same way.)"""
    if task.average_good_duration is not None:
        return task.average_good_duration, "measured"
    if task.expected_duration is not None:
        return task.expected_duration, "expected"
    return None


def max_expected_duration(task: Task, task_type: TaskType) -> timedelta | None:
    """The task's ``max_expected_duration``, falling back on its type's."""
    if task.max_expected_duration is not None:
        return task.max_expected_duration
    return task_type.max_expected_duration


def max_allowed_duration(task: Task, task_type: TaskType) -> timedelta | None:
    """The task's ``max_allowed_duration``, falling back on its type's."""
    if task.max_allowed_duration is not None:
        return task.max_allowed_duration
    return task_type.max_allowed_duration


def reference_start(task: Task) -> datetime:
    """Start of the period being promised (DESIGN.md §3 "reference start").

    ``last_good_start_at``; for a task that never succeeded, its ``created_at``;
    without that, its stored ``next_run``.
    """
    if task.last_good_start_at is not None:
        return to_utc(task.last_good_start_at)
    if task.created_at is not None:
        return to_utc(task.created_at)
    return to_utc(task.next_run)


def never_attempted(task: Task) -> bool:
    """True while no outcome at all has been recorded for the task."""
    return task.last_end_at is None and task.last_start_at is None and task.failure_count == 0


def oneshot_instant(task: Task) -> datetime:
    """The instant T a one-shot task was requested for.

    Before any attempt it is the task's ``next_run`` as given by the client.
    Afterwards ``next_run`` holds retry instants, so T is recovered from the
    deadline the policy set at creation: ``deadline - max_delay``.
    """
    if never_attempted(task):
        return to_utc(task.next_run)
    return to_utc(task.deadline) - (task.max_delay or ZERO)


def fmt_duration(value: timedelta) -> str:
    """A short human rendering of a duration (``1h05m``, ``3d2h``, ``45s``)."""
    total = int(value.total_seconds())
    sign = "-" if total < 0 else ""
    total = abs(total)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = []
    if days:
        parts.append(f"{days}d")
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes:02d}m" if parts else f"{minutes}m")
    if seconds or not parts:
        parts.append(f"{seconds}s")
    return sign + "".join(parts)


def span_text(span: timedelta) -> str:
    """A duration to the minute (at least one), as a chart's axis or a
    forecast's table says it: ``45 min``, ``6 h``, ``2 h 30 min``."""
    minutes = max(1, round(span.total_seconds() / 60))
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h" if not rest else f"{hours} h {rest} min"


def hours_text(hours: float) -> str:
    """``2.333`` hours as :func:`span_text` says it (``2 h 20 min``); 0 as
    ``0 min``."""
    return "0 min" if hours <= 0 else span_text(timedelta(hours=hours))


#: the zone a human output shows its instants in (``None``: none chosen)
_READER_ZONE: ContextVar[tzinfo | None] = ContextVar("reader_zone", default=None)


@contextmanager
def shown_in(zone: tzinfo) -> Iterator[tzinfo]:
    """Within the block, :func:`fmt_instant` and :func:`fmt_local` write
    every instant in ``zone`` (one clock for a whole output: ``task
    explain --tz Europe/Paris``); outside it they are as documented."""
    token = _READER_ZONE.set(zone)
    try:
        yield zone
    finally:
        _READER_ZONE.reset(token)


def reader_zone() -> tzinfo | None:
    """The zone :func:`shown_in` set, if any."""
    return _READER_ZONE.get()


def fmt_shown(value: datetime, zone: tzinfo) -> str:
    """An instant in ``zone`` to the second, with its offset
    (``2024-06-03 14:05:09+02:00``)."""
    return to_utc(value).astimezone(zone).replace(microsecond=0).isoformat(sep=" ")


def fmt_instant(value: datetime) -> str:
    """An instant in ISO 8601, UTC, to the second; in the reader's zone
    when one is set (:func:`shown_in`)."""
    zone = _READER_ZONE.get()
    if zone is not None:
        return fmt_shown(value, zone)
    return to_utc(value).replace(microsecond=0).isoformat()


def fmt_local(value: datetime, tz: str | tzinfo, *, seconds: bool = False) -> str:
    """An instant as a local wall time with its offset (``2024-06-03 14:05+02:00``,
    or ``2024-06-03 14:05:09+02:00`` with ``seconds``); in the reader's zone,
    to the second, when one is set (:func:`shown_in`): one zone per output."""
    zone = _READER_ZONE.get()
    if zone is not None:
        return fmt_shown(value, zone)
    local = to_utc(value).astimezone(get_zone(tz)).replace(microsecond=0)
    return local.isoformat(sep=" ", timespec="seconds" if seconds else "minutes")


def fmt_clock(value: datetime, tz: str | tzinfo) -> str:
    """The wall clock of ``value`` in ``tz``, hours and minutes (``13:05``):
    where an instant falls in a daily window of that zone (a blackout)."""
    return to_utc(value).astimezone(get_zone(tz)).strftime("%H:%M")
