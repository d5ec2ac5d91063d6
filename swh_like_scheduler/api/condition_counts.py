"""The figures of ``/metrics`` that read the whole task table: tasks per
type and status, and how many are OK, WARNING or in ERROR per type.

A condition is the policy's verdict on one task (:mod:`..conditions`): no
index answers it, so counting reads every live task — seconds with a
million, and the status counts read the whole table too. A scrape never
waits for them: it reports the latest counts and their age, and a
background thread counts again when they are older than ``every`` seconds
(one count at a time)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from .. import conditions
from ..exceptions import SchedulerError
from ..store import SchedulerStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Counts:
    #: tasks per ``(type, status)``
    tasks: dict[tuple[str, str], int]
    #: per type, tasks per condition
    conditions: dict[str, dict[str, int]]


class TableCounts:
    def __init__(
        self,
        store: SchedulerStore,
        clock: Callable[[], datetime],
        every: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.clock, self.every = store, clock, every
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._latest: Counts | None = None
        self._counted_at: float | None = None
        self._counting: threading.Thread | None = None

    def latest(self) -> tuple[Counts | None, float | None]:
        """The latest counts and their age in seconds (``None``: none yet);
        starts a count in the background when they are stale."""
        now = self.monotonic()
        with self._lock:
            age = None if self._counted_at is None else now - self._counted_at
            stale = age is None or age >= self.every
            if stale and (self._counting is None or not self._counting.is_alive()):
                self._counting = threading.Thread(
                    target=self._count, name="table-counts", daemon=True
                )
                self._counting.start()
            return self._latest, age

    def _count(self) -> None:
        started = self.monotonic()
        try:
            now = self.clock()
            tasks = self.store.schedule_health(now=now, counts=True).tasks
            summary = conditions.summarise(self.store, now)
        except SchedulerError as error:
            logger.warning("could not count the tasks: %s", error)
            return
        with self._lock:
            self._latest, self._counted_at = Counts(tasks, summary.counts), started
        logger.info("tasks counted in %.1f s", self.monotonic() - started)
