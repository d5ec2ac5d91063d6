"""Cron firing times in a task's IANA zone, DST-correct.

croniter 7 handles zones itself but fires an ambiguous wall time twice when
clocks go back (once per occurrence). We therefore let croniter enumerate
*wall-clock* matches only (naive datetimes, plain calendar arithmetic) and map
each match to an instant ourselves with :func:`times.local_to_utc`:

* a matching wall time that occurs twice fires once, at its first occurrence
  (``30 2 * * *`` in Europe/Paris on the last Sunday of October fires at
  02:30 CEST and not again at 02:30 CET; an hourly job likewise skips the
  repeated hour);
* a matching wall time that is skipped fires once, at the instant the clocks
  jumped (``30 2 * * *`` fires at 03:00 CEST on the last Sunday of March);
  several skipped matches collapse into that single firing, and a match at the
  jump instant itself does not fire a second time.

So a daily job neither fires twice nor skips a day, and every firing is a
real local time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Any

from croniter import CroniterBadDateError, croniter

from ..domain.exceptions import InvalidInput
from ..domain.model import TaskType
from ..domain.validation import cron_expression
from .times import get_zone, local_to_utc, to_utc, wall_time

# Safety bound on wall-time matches examined for one firing (a `* * * * *`
# job meets at most 60 matches in a repeated hour).
_MAX_SKIPPED = 10_000


def next_cron_time(expr: str, tz: str | tzinfo, after: datetime) -> datetime:
    """The first firing of ``expr`` in zone ``tz`` strictly after ``after`` (aware UTC).

    Raises InvalidInput('cron') when the expression is invalid or never fires.

    Cached per expression, zone and instant: the tasks of one cron schedule
    ask for the firing after the same instant (their last one), and a
    simulation's samples ask again for every task each simulated hour."""
    return _next_cron_time(expr, get_zone(tz), to_utc(after))


@lru_cache(maxsize=16_384)
def _next_cron_time(expr: str, zone: tzinfo, after_utc: datetime) -> datetime:
    expr = cron_expression("cron", expr)
    # Wall times at or before the wall reading of `after` can only map to
    # instants at or before `after` (the mapping is monotonic), so start there.
    start = wall_time(after_utc, zone)
    matches = croniter(expr, start)
    for _ in range(_MAX_SKIPPED):
        try:
            naive = matches.get_next(datetime)
        except CroniterBadDateError:
            raise InvalidInput("cron", f"{expr!r} never fires") from None
        # Always the first occurrence of a repeated wall time: a second pass of
        # it never fires, even when `after` lies inside that second pass.
        instant = local_to_utc(naive, zone)
        if instant > after_utc:
            return instant
    raise InvalidInput("cron", f"{expr!r}: no firing found after {after_utc.isoformat()}")


def cron_times(expr: str, tz: str | tzinfo, after: datetime) -> Iterator[datetime]:
    """Successive firings strictly after ``after``, strictly increasing, forever."""
    current = to_utc(after)
    while True:
        current = next_cron_time(expr, tz, current)
        yield current


#: the cron retry check looks at every gap between firings this far ahead
#: (a year and a day: every DST change of the zone, whatever the start)
GAP_HORIZON = timedelta(days=367)
#: firings enumerated from the start at most; a cron firing more often than
#: that in the horizon is examined over those and around each change of the
#: zone's UTC offset (the only place a gap can differ from the wall-clock one)
GAP_FIRINGS = 5_000
_DAY = timedelta(days=1)


def shortest_cron_gap(expr: str, tz: str | tzinfo, after: datetime) -> timedelta:
    """The shortest time between two consecutive firings in the year after
    ``after`` (:data:`GAP_HORIZON`), DST changes included: a spring-forward
    night can bring two firings closer than any other day does (``30 2,3 * *
    *`` in Europe/Paris: 30 minutes instead of an hour).

    The result depends on ``after`` only through its hour (cached per
    expression, zone and hour: an import of many tasks with one schedule
    computes it once)."""
    zone = get_zone(tz)
    hour = to_utc(after).replace(minute=0, second=0, microsecond=0)
    return _shortest_gap(cron_expression("cron", expr), zone, hour)


@lru_cache(maxsize=1024)
def _shortest_gap(expr: str, zone: tzinfo, start: datetime) -> timedelta:
    end = start + GAP_HORIZON
    shortest, complete = _scan(expr, zone, start, end, GAP_FIRINGS)
    if not complete:
        for change in _offset_changes(zone, start, end):
            around, _ = _scan(expr, zone, _firing_before(expr, zone, change), change + _DAY * 2)
            shortest = min(filter(None, (shortest, around)), default=None)
    if shortest is None:  # fewer than two firings in a year: the gap is longer than that
        later = cron_times(expr, zone, end)
        first = next(later)
        shortest = next(later) - first
    return shortest


def _firings(expr: str, zone: tzinfo, after: datetime) -> Iterator[datetime]:
    """The firings strictly after ``after`` (as :func:`cron_times`), from one
    croniter walk over wall times (a repeated wall time fires once, skipped
    ones collapse into the jump instant)."""
    matches = croniter(expr, wall_time(after, zone))
    last = to_utc(after)
    while True:
        try:
            naive = matches.get_next(datetime)
        except CroniterBadDateError:
            return
        instant = local_to_utc(naive, zone)
        if instant > last:
            yield instant
            last = instant


def _scan(
    expr: str, zone: tzinfo, begin: datetime, end: datetime, cap: int | None = None
) -> tuple[timedelta | None, bool]:
    """The shortest gap between the firings after ``begin`` up to ``end``
    (at most ``cap`` of them), and whether ``end`` was reached."""
    shortest: timedelta | None = None
    previous: datetime | None = None
    for count, instant in enumerate(_firings(expr, zone, begin)):
        if previous is not None:
            gap = instant - previous
            shortest = gap if shortest is None else min(shortest, gap)
        if instant > end:
            return shortest, True
        if cap is not None and count >= cap:
            return shortest, False
        previous = instant
    return shortest, True


def _firing_before(expr: str, zone: tzinfo, instant: datetime) -> datetime:
    """An instant just before the last firing before ``instant`` (or a day
    before ``instant`` when there is none)."""
    try:
        naive = croniter(expr, wall_time(instant - _DAY, zone)).get_prev(datetime)
    except CroniterBadDateError:
        return instant - _DAY
    return min(local_to_utc(naive, zone), instant - _DAY) - timedelta(microseconds=1)


def _offset_changes(zone: tzinfo, start: datetime, end: datetime) -> Iterator[datetime]:
    """The instants (to the minute) where ``zone``'s UTC offset changes
    between ``start`` and ``end``."""
    day = start
    offset = day.astimezone(zone).utcoffset()
    while day < end:
        following = day + _DAY
        if following.astimezone(zone).utcoffset() != offset:
            low, high = day, following
            while high - low > timedelta(minutes=1):
                middle = low + (high - low) / 2
                if middle.astimezone(zone).utcoffset() == offset:
                    low = middle
                else:
                    high = middle
            yield high
            offset = following.astimezone(zone).utcoffset()
        day = following


def default_cron_max_duration(
    fields: Mapping[str, Any], task_type: TaskType, now: datetime
) -> timedelta:
    """The time a cron firing has to finish when none is given: the task's
    (else its type's) ``max_allowed_duration``, else the shortest gap between
    two firings over the next year (a run should end before the next one)."""
    allowed = fields.get("max_allowed_duration") or task_type.max_allowed_duration
    if allowed is not None:
        return allowed
    return shortest_cron_gap(fields["cron"], fields.get("tz", "UTC"), now)
