"""Now, on the database's clock, for a daemon on a host whose clock may be off.

Only the database's clock decides (DESIGN.md §5, invariant 6): whether a
task is due, a one-shot's expiry, a periodic task's next start, every
instant a runner, monitor or listener writes. A :class:`DatabaseClock`
measures the offset of this host's clock against the database's (one
query; the round trip's midpoint stands for the instant it was read), again
every ``every`` seconds, and gives the host's clock plus that offset: a
database's instant without a query each time. It records the offset in the
store (``host_clock``, named in ``/health`` when off by more than a bound)
and logs it once when it passes ``warn_after`` (then again when it moves by
a second or more).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from ..domain.exceptions import SchedulerError
from ..domain.records import default_holder
from .interface import SchedulerStore

logger = logging.getLogger(__name__)

#: seconds between two measures of the offset
MEASURE_EVERY = 60.0
#: an offset past this is said in the log (and in /health: its own bound)
WARN_AFTER = timedelta(seconds=2)


def _local() -> datetime:
    return datetime.now(tz=UTC)


class DatabaseClock:
    """``now()``: the host's clock plus its offset from the database's."""

    def __init__(
        self,
        store: SchedulerStore,
        *,
        role: str,
        holder: str | None = None,
        every: float = MEASURE_EVERY,
        warn_after: timedelta = WARN_AFTER,
        local: Callable[[], datetime] = _local,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.role = store, role
        self.holder = holder or f"{role}:{default_holder()}"
        self.every, self.warn_after = every, warn_after
        self._local, self._monotonic = local, monotonic
        self._lock = threading.Lock()
        #: the database's clock minus this host's (``None``: never measured)
        self.offset: timedelta | None = None
        self._due = float("-inf")
        self._said: timedelta | None = None

    def now(self) -> datetime:
        """The database's instant now: measured again when due (a failed
        measure keeps the last offset; none yet: the host's clock)."""
        if self._monotonic() >= self._due:
            try:
                self.measure()
            except SchedulerError as error:  # the database is away: the pass will say so
                logger.debug("cannot measure the clock's offset: %s", error)
                self._due = self._monotonic() + min(self.every, 5.0)
        return self._local() + (self.offset or timedelta(0))

    def measure(self) -> timedelta:
        """Read the database's clock once and keep (and record) the offset."""
        with self._lock:
            before = self._local()
            db_now = self.store.database_now()
            after = self._local()
            offset = db_now - (before + (after - before) / 2)
            self.offset = offset
            self._due = self._monotonic() + self.every
        self._say(offset)
        try:
            self.store.record_host_clock(
                self.holder, role=self.role, offset_seconds=offset.total_seconds()
            )
        except SchedulerError as error:
            logger.debug("cannot record the clock's offset: %s", error)
        return offset

    def _say(self, offset: timedelta) -> None:
        off = abs(offset) > self.warn_after
        said = self._said
        if off and (said is None or abs(offset - said) >= timedelta(seconds=1)):
            where = "behind" if offset > timedelta(0) else "ahead of"
            logger.warning(
                "this host's clock is %.1f s %s the database's: the %s uses the "
                "database's clock for every instant it decides or writes; set the host's "
                "clock right (NTP)",
                abs(offset.total_seconds()),
                where,
                self.role,
            )
            self._said = offset
        elif not off and said is not None:
            logger.info("this host's clock is within %s of the database's again", self.warn_after)
            self._said = None
