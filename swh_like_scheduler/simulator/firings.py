"""Cron work lost: the firings of a cron task that no run served.

A cron group's stretch (:mod:`.results`) is measured between two good
starts of the same task: a firing that never ran leaves no gap of its own
(the gap over it is the survivors' only when the task ran again), and a
task that ran once or never in the horizon gives none at all. Under
overload the stretch of a nightly group is then empty or survivor-biased;
what was lost is counted here instead.

A firing is **owed** when its window (``cron_max_duration`` after it)
closed within the horizon: its run should have started by then. A run
**serves** the latest firing at or before its start (a run claimed late,
or the one run ``catch_up = latest`` makes of several missed firings,
serves one firing: the others were not run). Retries serve nothing more
(they are the same firing's run again). **Lost**: owed firings that no run
served: nightly work that never happened.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from ..policy import cron_times


@dataclass(frozen=True)
class CronPromise:
    """What one cron task owes: its expression, zone, its first firing
    (``can_start_by`` when created) and its window after each firing."""

    cron: str
    tz: str
    first: datetime
    window: timedelta


@lru_cache(maxsize=64)
def _firings(cron: str, tz: str, after: datetime, end: datetime) -> tuple[datetime, ...]:
    """The firings of ``cron`` in ``tz`` strictly after ``after``, up to ``end``."""
    found = []
    for instant in cron_times(cron, tz, after):
        if instant > end:
            break
        found.append(instant)
    return tuple(found)


def owed_and_lost(
    promise: CronPromise, starts: Sequence[datetime], start: datetime, end: datetime
) -> tuple[int, int]:
    """``(owed, lost)`` for one cron task simulated from ``start`` to
    ``end``, whose first runs (not retries) started at ``starts`` (sorted)."""
    firings = _firings(promise.cron, promise.tz, start - timedelta(microseconds=1), end)
    first = bisect_left(firings, promise.first)
    mine = firings[first:]
    if not mine or mine[0] != promise.first:
        mine = (promise.first, *mine)
    owed = [f for f in mine if f + promise.window <= end]
    served = set()
    for instant in starts:
        at = bisect_right(mine, instant) - 1
        if at >= 0:
            served.add(mine[at])
    return len(owed), sum(1 for f in owed if f not in served)


def lost_by_group(
    tasks: Iterable[tuple[str, CronPromise, Sequence[datetime]]], start: datetime, end: datetime
) -> dict[str, tuple[int, int]]:
    """Per group, ``(owed, lost)`` summed over its cron tasks, given as
    ``(group, promise, first-run starts)``."""
    sums: dict[str, tuple[int, int]] = {}
    for group, promise, starts in tasks:
        owed, lost = owed_and_lost(promise, sorted(starts), start, end)
        before = sums.get(group, (0, 0))
        sums[group] = (before[0] + owed, before[1] + lost)
    return sums
