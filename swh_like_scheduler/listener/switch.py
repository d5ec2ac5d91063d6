"""Turning the workers' task events on, as Flower does.

A worker started without ``-E`` sends heartbeats and no task event, so the
runs it takes are never seen to start nor end. Celery lets a client turn
them on: the ``enable_events`` remote-control command (the worker answers
"task events enabled", or "already enabled"). The listener's
:class:`EventSwitch` sends it to every worker at start, then every
``every`` seconds (a worker's events go off again when it reconnects to
its broker), and at once when the listener meets a worker it has no answer
from (its first heartbeat, a new process under its name). A worker whose
events were off and that had begun tasks meanwhile (``inspect stats``:
its count of tasks by name) gets a window in the store
(:meth:`~..store.SchedulerStore.mark_blind_workers`): the runs of those
tasks dispatched before then that never started may have run there, and
are not published again while it lives (:mod:`..policy.blind`).

A worker whose remote control is off never answers: the heartbeats tell
(:mod:`.blind`), and it is named in a warning.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..domain.records import BlindWindow
from ..plumbing.quietlog import QuietLog
from ..store import SchedulerStore

logger = logging.getLogger(__name__)
_failed = QuietLog(logger, logging.WARNING, every=600.0)

#: seconds between two broadcasts to every worker (Flower: 5)
DEFAULT_EVERY = 30.0
#: the shortest gap between two broadcasts, however often poked
MIN_GAP = 1.0
#: the shortest gap between two wake-ups for one worker that does not answer
MIN_WANT = 10.0
#: how long a broadcast waits for the workers' answers
REPLY_TIMEOUT = 1.0
#: what a worker answers when its task events were off until now
TURNED_ON = "task events enabled"


@dataclass(frozen=True)
class Answer:
    """A worker's answer to ``enable_events``: whether its task events were
    off until now (``turned_on``)."""

    hostname: str
    turned_on: bool


def answers(replies: Iterable[Any]) -> list[Answer]:
    """The answers in Celery's broadcast replies (``[{host: {"ok": text}}]``);
    anything else is left out."""
    found = []
    for reply in replies or ():
        if not isinstance(reply, Mapping):
            continue
        for hostname, body in reply.items():
            if isinstance(hostname, str) and isinstance(body, Mapping):
                text = body.get("ok")
                if isinstance(text, str):
                    found.append(Answer(hostname, text == TURNED_ON))
    return found


def tasks_begun(stats: Any) -> tuple[str, ...]:
    """The Celery task names a worker began (its ``inspect stats`` ``total``)."""
    total = stats.get("total") if isinstance(stats, Mapping) else None
    if not isinstance(total, Mapping):
        return ()
    return tuple(
        sorted(name for name, count in total.items() if isinstance(count, int) and count > 0)
    )


class EventSwitch:
    """Sends ``enable_events`` to the workers (module doc), in a thread of
    its own (:meth:`start`) or one round at a time (:meth:`round`)."""

    def __init__(
        self,
        app: Any,
        store: SchedulerStore,
        *,
        every: float = DEFAULT_EVERY,
        stop: threading.Event | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(tz=UTC),
    ) -> None:
        self.app = app
        self.store = store
        self.every = every
        self.stop = stop or threading.Event()
        self.clock = clock
        self._wake = threading.Event()
        self._lock = threading.Lock()
        #: workers that answered, by name: the main process they answered as
        self._answered: dict[str, int | None] = {}
        #: broadcasts sent so far, and those whose answers are in
        self.rounds = 0
        self.done = 0
        #: when each worker that has not answered last woke the switch
        self._wanted: dict[str, float] = {}
        self._thread: threading.Thread | None = None

    def answered(self, hostname: str, pid: int | None = None) -> bool:
        """Whether ``hostname`` (as main process ``pid``, when given) answered."""
        with self._lock:
            if hostname not in self._answered:
                return False
            answered_as = self._answered[hostname]
            if pid is not None and answered_as is None:
                # the first process seen since its answer is the one that answered
                self._answered[hostname] = answered_as = pid
            return pid is None or answered_as == pid

    def want(self, hostname: str, pid: int | None = None) -> None:
        """A worker was seen: turn its events on soon unless it answered (a
        worker that never answers wakes the switch once per ``MIN_WANT``)."""
        if self.answered(hostname, pid):
            return
        now = time.monotonic()
        with self._lock:
            if now - self._wanted.get(hostname, float("-inf")) < MIN_WANT:
                return
            self._wanted[hostname] = now
        self._wake.set()

    def forget(self, hostname: str) -> None:
        """A worker went offline: ask it again when it comes back."""
        with self._lock:
            self._answered.pop(hostname, None)

    def round(self) -> list[Answer]:
        """One broadcast, and what its answers tell (module doc)."""
        self.rounds += 1
        replies = self.app.control.enable_events(reply=True, timeout=REPLY_TIMEOUT)
        found = answers(replies)
        with self._lock:
            for answer in found:
                self._answered[answer.hostname] = None
                self._wanted.pop(answer.hostname, None)
        turned = [a.hostname for a in found if a.turned_on]
        if turned:
            self._windows(turned)
        self.done += 1
        return found

    def _windows(self, hostnames: list[str]) -> None:
        """The windows of workers whose events were off until now."""
        try:
            stats = self.app.control.inspect(destination=hostnames, timeout=REPLY_TIMEOUT).stats()
        except Exception as error:  # the broker: the tasks begun stay unknown
            _failed.log("cannot read the stats of %s: %s", ", ".join(hostnames), error, key="stats")
            stats = None
        now = self.clock()
        windows = []
        for hostname in hostnames:
            found = stats.get(hostname) if isinstance(stats, Mapping) else None
            begun = tasks_begun(found) if found is not None else None
            if begun == ():
                logger.info(
                    "worker %s sent no task events (started without -E): turned them on "
                    "before it began any task",
                    hostname,
                )
                continue
            what = ", ".join(begun) if begun else "tasks it did not say"
            logger.warning(
                "worker %s sent no task events (started without -E) and began %s before "
                "they were turned on: runs of these dispatched before now that never "
                "started may have run there and are not published again while it is "
                "alive; start it with -E",
                hostname,
                what,
            )
            windows.append(BlindWindow(hostname, since=now, until=now, tasks=begun))
        if windows:
            self.store.mark_blind_workers(windows)

    def start(self) -> threading.Thread:
        """Run the rounds in a daemon thread until ``stop`` is set."""
        self._thread = threading.Thread(target=self._run, name="event-switch", daemon=True)
        self._thread.start()
        return self._thread

    def _run(self) -> None:
        last = float("-inf")
        while not self.stop.is_set():
            gap = time.monotonic() - last
            if gap < MIN_GAP and self.stop.wait(MIN_GAP - gap):
                break
            last = time.monotonic()
            self._wake.clear()
            try:
                self.round()
            except Exception as error:  # the broker or the database: the next round
                _failed.log("cannot turn the workers' task events on: %s", error, key="round")
            self._wake.wait(self.every)

    def join(self, timeout: float | None = None) -> None:
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
