"""Workers seen taking tasks without sending task events, from their heartbeats.

Celery's heartbeat carries ``processed``, the tasks the worker began since
it started. :class:`BlindWatch` keeps, per worker, its latest heartbeat and
the instant of its latest task event (both on the worker's clock): a
heartbeat whose count grew while no task event came since the one before
is a sign (:func:`..policy.blind.heartbeat_blind`). A sign is confirmed
when no task event of the worker came since: after the switch
(:class:`.switch.EventSwitch`) sent a round of ``enable_events`` the worker
did not answer (its remote control is off: when it answers, the switch
deals with it), or, with no switch, at the worker's next heartbeat. A
confirmed worker gets an open window in the store and a warning naming it,
once; its next task event closes the window. One stalled run is enough to
tell: a run the worker took blind never ends, so nothing else of that task
would come.

Memory only: a restarted listener starts afresh (a window in the store
stays until a task event of the worker closes it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime

from ..domain.records import BlindWindow, WorkerSighting
from ..policy.blind import heartbeat_blind
from .events import RunEvent
from .switch import EventSwitch

logger = logging.getLogger(__name__)


class BlindWatch:
    """Per worker: its latest heartbeat, its latest task event, the signs
    in a row, and whether this listener opened its window."""

    def __init__(self, switch: EventSwitch | None = None) -> None:
        self.switch = switch
        self._beats: dict[str, tuple[datetime, int]] = {}
        self._task_event: dict[str, datetime] = {}
        #: per worker with a sign not settled: the heartbeat before the sign,
        #: and the switch's rounds done when it was seen
        self._signs: dict[str, tuple[datetime, int]] = {}
        self._open: set[str] = set()

    def observe(
        self, run_events: Iterable[RunEvent], sightings: Sequence[WorkerSighting]
    ) -> list[BlindWindow]:
        """What a batch's task events and worker events tell (module doc):
        the windows to record, after the batch's sightings."""
        windows: list[BlindWindow] = []
        for event in run_events:
            if event.worker is None:
                continue
            seen = self._task_event.get(event.worker)
            if seen is None or event.at > seen:
                self._task_event[event.worker] = event.at
            if event.worker in self._open:
                self._open.discard(event.worker)
                logger.info("worker %s sends task events again", event.worker)
                windows.append(BlindWindow(event.worker, since=None, until=event.at))
        for sighting in sorted(sightings, key=lambda s: s.at):
            window = self._sighting(sighting)
            if window is not None:
                windows.append(window)
        return windows

    def _sighting(self, sighting: WorkerSighting) -> BlindWindow | None:
        name = sighting.hostname
        if not sighting.online:
            self._beats.pop(name, None)
            self._signs.pop(name, None)
            self._open.discard(name)  # its process ended: a new one is watched afresh
            if self.switch is not None:
                self.switch.forget(name)
            return None
        if self.switch is not None:
            self.switch.want(name, sighting.pid)
        if sighting.processed is None:
            return None
        previous = self._beats.get(name)
        if previous is not None and sighting.at <= previous[0]:
            return None  # late or repeated: the newer one was compared
        self._beats[name] = (sighting.at, sighting.processed)
        if previous is not None and sighting.processed < previous[1]:
            # a new process: its count starts again, and it is watched afresh
            self._signs.pop(name, None)
            self._open.discard(name)
            return None
        current = (sighting.at, sighting.processed)
        if name not in self._signs and heartbeat_blind(
            previous, current, self._task_event.get(name)
        ):
            assert previous is not None  # a sign needs a heartbeat before
            done = self.switch.done if self.switch is not None else 0
            self._signs[name] = (previous[0], done)
            return None
        if name not in self._signs or name in self._open:
            return None
        since, done = self._signs[name]
        seen = self._task_event.get(name)
        if seen is not None and seen >= since:
            del self._signs[name]  # a task event came: no sign any more
            return None
        if self.switch is not None:
            if self.switch.answered(name, sighting.pid):
                del self._signs[name]  # it answers: the switch deals with it
                return None
            if self.switch.done <= done:
                return None  # not asked yet since the sign
        del self._signs[name]
        self._open.add(name)
        asked = (
            "it does not answer the listener's request to turn them on (is its remote control off?)"
            if self.switch is not None
            else "the listener does not ask for them (--no-enable-events)"
        )
        logger.warning(
            "worker %s takes tasks without sending task events (started without -E), and "
            "%s: the runs it takes are never seen to start or end, and are not published "
            "again while it is alive; start it with -E",
            name,
            asked,
        )
        return BlindWindow(name, since=since, until=None, tasks=None)
