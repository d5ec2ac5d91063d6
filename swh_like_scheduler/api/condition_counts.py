"""How many tasks are OK, WARNING or in ERROR per type, for ``/metrics``.

A condition is the policy's verdict on one task (:mod:`..conditions`): no
index answers it, so counting reads every live task — seconds with a
million. A scrape never waits for that: it reports the latest counts and
their age, and a background thread recounts when they are older than
``every`` seconds (one count at a time)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from .. import conditions
from ..exceptions import SchedulerError
from ..store import SchedulerStore

logger = logging.getLogger(__name__)


class ConditionCounts:
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
        self._latest: conditions.ConditionSummary | None = None
        self._counted_at: float | None = None
        self._counting: threading.Thread | None = None

    def latest(self) -> tuple[conditions.ConditionSummary | None, float | None]:
        """The latest counts and their age in seconds (``None``: none yet);
        starts a recount in the background when they are stale."""
        now = self.monotonic()
        with self._lock:
            age = None if self._counted_at is None else now - self._counted_at
            stale = age is None or age >= self.every
            if stale and (self._counting is None or not self._counting.is_alive()):
                self._counting = threading.Thread(
                    target=self._count, name="condition-counts", daemon=True
                )
                self._counting.start()
            return self._latest, age

    def _count(self) -> None:
        started = self.monotonic()
        try:
            summary = conditions.summarise(self.store, self.clock())
        except SchedulerError as error:
            logger.warning("could not count the tasks' conditions: %s", error)
            return
        with self._lock:
            self._latest, self._counted_at = summary, started
        logger.info("task conditions counted in %.1f s", self.monotonic() - started)
