"""Blackout periods: local-time windows in which a task must not run.

A window ``start-end`` is read on the wall clock of the task's zone and is
half-open: it contains wall times ``start <= t < end``. When ``start > end``
it crosses midnight (``23:00-01:00``); an end of ``24:00`` (stored as
``time.max``) or ``00:00`` means midnight at the end of the day.

Membership depends only on the wall-clock reading, so during a repeated hour
(clocks going back) a window covering part of it applies to both passes, and
a window lying wholly inside skipped wall times never applies that day.

Leaving a window means reaching its end on the wall clock; that end is mapped
to an instant with :func:`times.local_to_utc` (a skipped end maps to the
instant the clocks jumped). Windows may overlap or touch: leaving one may land
in another, so ends are chained until an instant lies outside every window.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, time, timedelta, tzinfo

from ..domain.exceptions import InvalidInput
from ..domain.model import BlackoutPeriod, Task
from .times import get_zone, local_to_utc, to_utc, wall_time

_DAY = timedelta(days=1)
_DAY_US = 86_400_000_000


def _micros(value: time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _bounds(period: BlackoutPeriod) -> tuple[int, int]:
    """Start and end of ``period`` in microseconds after local midnight (end may be a day)."""
    start = _micros(period.start)
    end = _DAY_US if period.end == time.max else _micros(period.end)
    if end == 0:
        end = _DAY_US
    return start, end


def _contains(period: BlackoutPeriod, wall: datetime) -> bool:
    start, end = _bounds(period)
    moment = _micros(wall.time())
    if start < end:
        return start <= moment < end
    return moment >= start or moment < end


def _wall_end(period: BlackoutPeriod, wall: datetime) -> datetime:
    """The naive wall time at which ``period`` (containing ``wall``) ends."""
    start, end = _bounds(period)
    midnight = wall.replace(hour=0, minute=0, second=0, microsecond=0)
    # The evening part of a window crossing midnight ends tomorrow; a same-day
    # window, or the morning part of a crossing one, ends today.
    evening = start > end and _micros(wall.time()) >= start
    base = midnight + _DAY if evening else midnight
    return base + timedelta(microseconds=end)


def window_at(
    periods: Sequence[BlackoutPeriod], tz: str | tzinfo, instant: datetime
) -> BlackoutPeriod | None:
    """The first of ``periods`` whose wall-clock window contains ``instant``, if any."""
    wall = wall_time(instant, tz)
    for period in periods:
        if _contains(period, wall):
            return period
    return None


def blackout_at(task: Task, instant: datetime) -> BlackoutPeriod | None:
    """The blackout period of ``task`` in force at ``instant`` (None when free to run)."""
    return window_at(task.blackout_periods, task.tz, instant)


def covers_whole_day(periods: Sequence[BlackoutPeriod]) -> bool:
    """Whether the union of the windows covers every wall time of a day."""
    pieces: list[tuple[int, int]] = []
    for period in periods:
        start, end = _bounds(period)
        if start < end:
            pieces.append((start, end))
        else:
            pieces.extend([(start, _DAY_US), (0, end)])
    reached = 0
    for start, end in sorted(pieces):
        if start > reached:
            return False
        reached = max(reached, end)
    return reached >= _DAY_US


def leave_blackouts(
    periods: Sequence[BlackoutPeriod], tz: str | tzinfo, instant: datetime
) -> datetime:
    """The first instant at or after ``instant`` outside every window (UTC).

    ``instant`` itself when it is outside them all. Raises
    InvalidInput('blackout_periods') when the windows cover the whole day.
    """
    current = to_utc(instant)
    if not periods:
        return current
    if covers_whole_day(periods):
        raise InvalidInput(
            "blackout_periods", "the blackout windows cover the whole day; the task could never run"
        )
    zone = get_zone(tz)
    # Each step leaves at least one window; a handful of passes over the
    # windows (plus DST oddities) always suffices when the day is not covered.
    for _ in range(4 * len(periods) + 8):
        wall = wall_time(current, zone)
        ends = [_wall_end(p, wall) for p in periods if _contains(p, wall)]
        if not ends:
            return current
        following = local_to_utc(max(ends), zone, after=current)
        if following <= current:  # cannot happen with a correct zone; never loop
            following = current + timedelta(seconds=1)
        current = following
    raise InvalidInput("blackout_periods", "could not find a time outside the blackout windows")


def blackout_end(task: Task, instant: datetime) -> datetime:
    """When ``task`` may start if it wanted to at ``instant``: ``instant`` moved past
    every blackout window it falls in (chained), or unchanged when it is free."""
    return leave_blackouts(task.blackout_periods, task.tz, instant)
