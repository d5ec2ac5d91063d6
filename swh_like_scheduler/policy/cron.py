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

from collections.abc import Iterator
from datetime import datetime, timedelta, tzinfo

from croniter import CroniterBadDateError, croniter

from ..exceptions import InvalidInput
from ..validation import cron_expression
from .times import get_zone, local_to_utc, to_utc, wall_time

# Safety bound on wall-time matches examined for one firing (a `* * * * *`
# job meets at most 60 matches in a repeated hour).
_MAX_SKIPPED = 10_000


def next_cron_time(expr: str, tz: str | tzinfo, after: datetime) -> datetime:
    """The first firing of ``expr`` in zone ``tz`` strictly after ``after`` (aware UTC).

    Raises InvalidInput('cron') when the expression is invalid or never fires.
    """
    expr = cron_expression("cron", expr)
    zone = get_zone(tz)
    after_utc = to_utc(after)
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


def shortest_cron_gap(
    expr: str, tz: str | tzinfo, after: datetime, *, firings: int = 64
) -> timedelta:
    """The shortest time between consecutive firings among the next ``firings`` ones.

    A heuristic "period" of a cron schedule (used by the retry budget check);
    DST days are included when they fall inside the window examined.
    """
    times = cron_times(expr, tz, after)
    previous = next(times)
    shortest: timedelta | None = None
    for _ in range(max(1, firings - 1)):
        current = next(times)
        gap = current - previous
        if shortest is None or gap < shortest:
            shortest = gap
        previous = current
    assert shortest is not None
    return shortest
