"""The workers' clocks, measured from their heartbeats, and their events'
instants moved onto the database's clock.

A Celery event carries its sender's ``time.time()``. A worker whose clock is
90 s behind would record its runs' ends 90 s early, and a periodic task's
next start (the end plus its cooldown) would come 90 s early too: with a
cooldown under 90 s, every run would be due again the moment it ended. The
database's clock decides (DESIGN.md §5, invariant 6), so the listener
measures each worker's offset: the instant a heartbeat is received (the
database's clock, :class:`~..store.clock.DatabaseClock`) minus the instant
it carries. That difference is the worker's offset plus the time the event
spent on its way (never negative); the smallest of the last
:data:`WINDOW` heartbeats keeps the offset and the least of the delays.
Only heartbeats of batches taken with the queue empty behind them count
(a listener catching up on a backlog receives them late). From the first
one, an offset of :data:`CORRECT_AFTER` or more is applied to every event
of that worker (its runs' starts and ends, its heartbeats) and said in a
warning naming it; a smaller one is left alone (a delay of a second is not
a clock), and a later, smaller difference moves it.

Pure bookkeeping: the caller gives the instants.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta

from ..domain.records import WorkerSighting
from .events import RunEvent

logger = logging.getLogger(__name__)

#: heartbeats kept per worker (about two minutes at Celery's 2 s)
WINDOW = 60
#: heartbeats needed before an offset is applied (the first one received
#: fresh: a worker whose clock is 90 s behind looks silent for 90 s, so the
#: monitor would take its runs while it waits for more)
SAMPLES = 1
#: the smallest offset applied (and named)
CORRECT_AFTER = timedelta(seconds=3)


class WorkerClocks:
    """Per worker, its recent (received - sent) differences, and the offset
    applied to its events (``None``: none)."""

    def __init__(self, *, correct_after: timedelta = CORRECT_AFTER) -> None:
        self.correct_after = correct_after
        self._seen: dict[str, deque[timedelta]] = {}
        self._applied: dict[str, timedelta] = {}

    def observe(
        self, sightings: Sequence[WorkerSighting], received: datetime
    ) -> dict[str, float | None]:
        """Take the heartbeats of a batch received at ``received`` (the
        database's clock); returns the workers whose applied offset changed,
        with the offset in seconds (``None``: no longer applied)."""
        changed: dict[str, float | None] = {}
        for sighting in sightings:
            name = sighting.hostname
            if not sighting.online:
                self._seen.pop(name, None)
                if self._applied.pop(name, None) is not None:
                    changed[name] = None
                continue
            seen = self._seen.setdefault(name, deque(maxlen=WINDOW))
            seen.append(received - sighting.at)
            if len(seen) < SAMPLES:
                continue
            offset = min(seen)
            before = self._applied.get(name)
            if abs(offset) < self.correct_after:
                if before is not None:
                    del self._applied[name]
                    changed[name] = None
                    logger.info(
                        "worker %s's clock is within %s of the database's again",
                        name,
                        self.correct_after,
                    )
                continue
            if before is None or abs(offset - before) >= timedelta(seconds=1):
                self._applied[name] = offset
                changed[name] = offset.total_seconds()
                where = "behind" if offset > timedelta(0) else "ahead of"
                logger.warning(
                    "worker %s's clock is %.1f s %s the database's (from its heartbeats): its "
                    "events' instants are moved by that much; set the host's clock right (NTP)",
                    name,
                    abs(offset.total_seconds()),
                    where,
                )
        return changed

    def offset(self, hostname: str | None) -> timedelta | None:
        """The offset applied to ``hostname``'s events, if any."""
        return self._applied.get(hostname) if hostname is not None else None

    def event(self, event: RunEvent) -> RunEvent:
        """``event`` with its instants on the database's clock."""
        offset = self.offset(event.worker)
        if offset is None:
            return event
        started = event.started + offset if event.started is not None else None
        return dataclasses.replace(event, at=event.at + offset, started=started)

    def sighting(self, sighting: WorkerSighting) -> WorkerSighting:
        """``sighting`` on the database's clock."""
        offset = self.offset(sighting.hostname)
        if offset is None:
            return sighting
        return dataclasses.replace(sighting, at=sighting.at + offset)
