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
seconds (one count at a time)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from .. import conditions
from ..exceptions import SchedulerError
from ..store import SchedulerStore

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Counts:
    #: tasks per ``(type, status)``
    tasks: dict[tuple[str, str], int]
    #: per type, tasks per condition
    conditions: dict[str, dict[str, int]]


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
    ) -> None:
        self._count_now, self.every, self.monotonic = count, every, monotonic
        #: what is counted, for the log
        self.what = what
        self._lock = threading.Lock()
        self._latest: T | None = None
        self._counted_at: float | None = None
        self._counting: threading.Thread | None = None

    def latest(self) -> tuple[T | None, float | None]:
        """The latest value and its age in seconds (``None``: none yet);
        starts a count in the background when it is stale."""
        now = self.monotonic()
        with self._lock:
            age = None if self._counted_at is None else now - self._counted_at
            stale = age is None or age >= self.every
            if stale and (self._counting is None or not self._counting.is_alive()):
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
        with self._lock:
            self._latest, self._counted_at = value, started
        logger.debug("%s counted in %.1f s", self.what, self.monotonic() - started)


#: open runs per ``(type, run status)``
RunCounts = dict[tuple[str, str], int]


def table_counts(
    store: SchedulerStore, clock: Callable[[], datetime], every: float
) -> Refreshed[Counts]:
    """Tasks per type and status, and per type and condition."""

    def count() -> Counts:
        now = clock()
        tasks = store.schedule_health(now=now, counts=True, runs=False).tasks
        return Counts(tasks, conditions.summarise(store, now).counts)

    return Refreshed(count, every, what="tasks")


def run_counts(
    store: SchedulerStore, clock: Callable[[], datetime], every: float
) -> Refreshed[RunCounts]:
    """Open runs per type and run status."""

    def count() -> RunCounts:
        return store.schedule_health(now=clock(), counts=False, runs=True).open_runs

    return Refreshed(count, every, what="open runs")
