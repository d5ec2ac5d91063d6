"""The figures of ``/metrics``, ``/conditions`` and the console too costly
to read at each scrape, read in the background.

* tasks per type and status, and how many are OK, WARNING or in ERROR per
  type (:func:`table_counts`): the census stored by the monitor's census
  step (:mod:`..health.census`), read by every replica with its instant
  and its history (the console's trends); a process with no monitor
  behind it runs the step itself when the census is older than its cost
  allows;
* open runs per type and status (:func:`run_counts`): joining every open
  run to its task's type reads the whole task table once there are many
  (0.15 s with 1M tasks and 100k open runs, on every scrape).

A scrape never waits for them: it reports the latest figures and their age,
and a background thread reads again when they are older than ``every``
seconds (one read at a time), or sooner when reading is cheap: a read that
took ``d`` seconds is redone once older than ``max(floor, 20 * d)``.
Activity figures are kept with their instant in this process for the last
``keep`` seconds, thinned to a sample per ``keep / 240`` seconds."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from ..domain.exceptions import SchedulerError, StoreUnavailable
from ..domain.records import default_holder
from ..store import SchedulerStore
from ..store.values import ScheduleHealth

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Counts:
    """A stored census as the API reports it (:mod:`..health.census`)."""

    #: tasks per ``(type, status)``
    tasks: dict[tuple[str, str], int]
    #: per type, tasks per condition
    conditions: dict[str, dict[str, int]]
    #: how many tasks were not OK in all
    not_ok: int = 0
    #: the instant the census holds for
    at: datetime | None = None
    #: the census's number (a selection confirmed on one census is
    #: re-checked when acted on under another)
    generation: int = field(default=0, compare=False)
    #: earlier censuses (instant, per type and level), oldest first
    history: tuple[tuple[datetime, dict[str, dict[str, int]]], ...] = field(
        default=(), compare=False
    )


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
        except NotYet as error:
            logger.debug("%s: %s", self.what, error)
            return
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


class NotYet(StoreUnavailable):
    """No census is stored yet (the first one is under way)."""


class CensusCounts(Refreshed[Counts]):
    """The stored census, read in the background; when it is older than
    what its own cost allows (no monitor keeps it: ``standalone`` without
    one, a test), this process runs the census step itself
    (:func:`~..health.census.refresh`, one process at a time). After an
    action (:meth:`soon`) the next read counts again at once."""

    def __init__(self, store: SchedulerStore, clock: Callable[[], datetime], every: float) -> None:
        super().__init__(self._read, every, what="tasks", floor=2.0)
        self.store, self.clock = store, clock
        self._force = False
        self._holder = f"api:{default_holder()}"

    def soon(self) -> None:
        with self._lock:
            self._force = True
        super().soon()

    def latest(self) -> tuple[Counts | None, float | None]:
        """The latest census read and its age: how long ago the instant it
        holds for was, on this process's clock."""
        counted, _ = super().latest()
        if counted is None or counted.at is None:
            return counted, None
        return counted, max(0.0, (self.clock() - counted.at).total_seconds())

    def history(self) -> list[tuple[datetime, Any]]:
        counted, _ = self.latest()
        if counted is None:
            return []
        return [(at, _Levels(levels)) for at, levels in counted.history]

    def fresh_for(self, took: float) -> timedelta:
        """How old a census may be before this process counts again: 20
        times what counting cost, within [5 s, ``every``]."""
        return timedelta(seconds=min(self.every, max(5.0, 20 * took)))

    def _read(self) -> Counts:
        from ..health.census import KEEP, refresh

        now = self.clock()
        with self._lock:
            force, self._force = self._force, False
        latest = self.store.latest_census()
        took = 0.0 if latest is None else latest.took
        if force or latest is None or now - latest.at >= self.fresh_for(took):
            fresh = timedelta(0) if force else self.fresh_for(took)
            step = refresh(self.store, now, holder=self._holder, fresh_for=fresh)
            latest = step.census or self.store.latest_census()
        if latest is None:
            raise NotYet("no census yet: the first one is under way")
        history = self.store.census_history(latest.at - KEEP)
        return Counts(
            latest.tasks,
            latest.conditions,
            latest.not_ok,
            latest.at,
            generation=latest.id,
            history=tuple((c.at, c.conditions) for c in history),
        )


@dataclass(frozen=True)
class _Levels:
    """A past census as the trend charts read it."""

    conditions: dict[str, dict[str, int]]


def table_counts(
    store: SchedulerStore, clock: Callable[[], datetime], every: float
) -> CensusCounts:
    """Tasks per type and status, and per type and condition: the stored census."""
    return CensusCounts(store, clock, every)


def run_counts(
    store: SchedulerStore, clock: Callable[[], datetime], every: float
) -> Refreshed[RunCounts]:
    """Open runs per type and run status."""

    def count() -> RunCounts:
        return store.schedule_health(now=clock(), counts=False, runs=True, queued_upto=0).open_runs

    return Refreshed(count, every, what="open runs")


def activity(
    store: SchedulerStore, clock: Callable[[], datetime], every: float
) -> Refreshed[ScheduleHealth]:
    """The console's figures of work in flight: open runs, runs dispatched
    and ended within the last hour, per type."""

    def count() -> ScheduleHealth:
        return store.schedule_health(now=clock(), counts=False, runs=True, queued_upto=0)

    return Refreshed(count, every, what="activity", floor=3.0, clock=clock)
