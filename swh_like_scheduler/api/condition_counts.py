"""The figures of ``/metrics`` (and ``/conditions``) too costly to read at
each scrape, counted in the background.

* tasks per type and status, and how many are OK, WARNING or in ERROR per
  type (:func:`table_counts`): a condition is the policy's verdict on one
  task (:mod:`..conditions`), no index answers it, so counting reads every
  live task — seconds with a million;
* open runs per type and status (:func:`run_counts`): joining every open
  run to its task's type reads the whole task table once there are many
  (0.15 s with 1M tasks and 100k open runs, on every scrape).

A scrape never waits for them: it reports the latest figures and their age,
and a background thread counts again when they are older than ``every``
seconds (one count at a time) — or sooner when counting is cheap: a count
that took ``d`` seconds is redone once older than ``max(floor, 20 * d)``
(a few seconds on a small installation, so the console's counts are
live; ``every`` at a million tasks). Each count is kept with its instant
for the console's trends (the last ``keep`` seconds, thinned to a
sample per ``keep / 240`` seconds)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from .. import conditions
from ..conditions import Problem
from ..exceptions import SchedulerError
from ..store import SchedulerStore
from ..store.values import ScheduleHealth

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Counts:
    #: tasks per ``(type, status)``
    tasks: dict[tuple[str, str], int]
    #: per type, tasks per condition
    conditions: dict[str, dict[str, int]]
    #: the tasks that are not OK, worst first (the worst ones when many)
    problems: tuple[Problem, ...] = ()
    #: how many tasks were not OK in all
    not_ok: int = 0
    #: when the conditions were evaluated
    at: datetime | None = None
    #: a number of this count, new at each count (a selection made on one
    #: count is acted on only if it is still the latest)
    generation: int = field(default=0, compare=False)


class Refreshed(Generic[T]):
    """A value counted by ``count`` in the background, again when older
    than ``every`` seconds."""

    def __init__(
        self,
        count: Callable[[], T],
        every: float,
        *,
        what: str = "figures",
        monotonic: Callable[[], float] = time.monotonic,
        floor: float = 5.0,
        clock: Callable[[], datetime] | None = None,
        keep: timedelta = timedelta(hours=6),
    ) -> None:
        self._count_now, self.every, self.monotonic = count, every, monotonic
        #: what is counted, for the log
        self.what = what
        #: the shortest time between two counts
        self.floor = floor
        self._lock = threading.Lock()
        self._latest: T | None = None
        self._counted_at: float | None = None
        self._took: float | None = None
        self._counting: threading.Thread | None = None
        self._poked = False
        self._clock, self._keep = clock, keep
        #: (instant, value) of past counts, oldest first (with a ``clock``)
        self._history: deque[tuple[datetime, T]] = deque()

    def soon(self) -> None:
        """Count again at the next look (the values changed: an action)."""
        with self._lock:
            self._poked = True

    def due_after(self) -> float:
        """How old the latest count may get before the next one."""
        if self._took is None:
            return self.every
        return min(self.every, max(self.floor, 20 * self._took))

    def history(self) -> list[tuple[datetime, T]]:
        """Past counts with their instants, oldest first (the latest included)."""
        with self._lock:
            return list(self._history)

    def latest(self) -> tuple[T | None, float | None]:
        """The latest value and its age in seconds (``None``: none yet);
        starts a count in the background when it is stale."""
        now = self.monotonic()
        with self._lock:
            age = None if self._counted_at is None else now - self._counted_at
            stale = age is None or age >= self.due_after() or self._poked
            if stale and (self._counting is None or not self._counting.is_alive()):
                self._poked = False
                self._counting = threading.Thread(target=self._count, daemon=True)
                self._counting.start()
            return self._latest, age

    def _count(self) -> None:
        started = self.monotonic()
        try:
            value = self._count_now()
        except SchedulerError as error:
            logger.warning("could not count the %s: %s", self.what, error)
            return
        took = self.monotonic() - started
        with self._lock:
            self._latest, self._counted_at, self._took = value, started, took
            if self._clock is not None:
                self._remember(self._clock(), value)
        logger.debug("%s counted in %.1f s", self.what, self.monotonic() - started)

    def _remember(self, instant: datetime, value: T) -> None:
        kept = self._history
        # samples a slice of ``keep`` apart, and the latest: the history stays small
        if len(kept) > 1 and kept[-1][0] - kept[-2][0] < self._keep / 240:
            kept.pop()
        kept.append((instant, value))
        while kept and instant - kept[0][0] > self._keep:
            kept.popleft()


#: open runs per ``(type, run status)``
RunCounts = dict[tuple[str, str], int]


def table_counts(
    store: SchedulerStore, clock: Callable[[], datetime], every: float
) -> Refreshed[Counts]:
    """Tasks per type and status, and per type and condition."""

    generations = iter(range(1, 2**62))

    def count() -> Counts:
        now = clock()
        tasks = store.schedule_health(now=now, counts=True, runs=False).tasks
        found = conditions.census(store, now)
        return Counts(
            tasks, found.counts, found.problems, found.not_ok, now, generation=next(generations)
        )

    return Refreshed(count, every, what="tasks", clock=clock)


def run_counts(
    store: SchedulerStore, clock: Callable[[], datetime], every: float
) -> Refreshed[RunCounts]:
    """Open runs per type and run status."""

    def count() -> RunCounts:
        return store.schedule_health(now=clock(), counts=False, runs=True).open_runs

    return Refreshed(count, every, what="open runs")


def activity(
    store: SchedulerStore, clock: Callable[[], datetime], every: float
) -> Refreshed[ScheduleHealth]:
    """The console's figures of work in flight: open runs, runs dispatched
    and ended within the last hour, per type."""

    def count() -> ScheduleHealth:
        return store.schedule_health(now=clock(), counts=False, runs=True)

    return Refreshed(count, every, what="activity", floor=3.0, clock=clock)
