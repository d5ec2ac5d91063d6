"""Self-fencing in a worker process: what a body is told, and the clock
and the database calls the fence relies on.

A worker process stops counting a body as its run's owner once its
renewals have not succeeded for the bound the monitor's published settings
give (:mod:`swh_like_scheduler.domain.fencing`): the body then gets
:class:`LeaseLost` (a :class:`RunTaken`), and its end is never reported as
the run's outcome. Nothing here may wait on the database for longer than
the time left before that bound: a process whose database connections hang
(a partition that leaves the sockets open: nothing answers, nothing fails)
must still stop its bodies in time. So every call to the store that the
fence depends on goes through :class:`BoundedCalls`, one daemon thread per
process that makes the calls while the caller waits at most as long as it
may.

* :class:`RunTaken` — the store answered that the run is this copy's no more;
* :class:`LeaseLost` — this process could not renew the run in time;
* :func:`local_clock` — the monotonic clock that also counts a suspended
  host (``CLOCK_BOOTTIME`` on Linux);
* :class:`TermsCache` — the monitor's settings as last read, and when to
  read them again.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from ..domain.exceptions import SchedulerError
from ..domain.fencing import DEFAULT_TERMS, LeaseTerms
from ..plumbing.quietlog import QuietLog

logger = logging.getLogger(__name__)
_unread = QuietLog(logger, logging.WARNING)

T = TypeVar("T")

#: seconds between two reads of the monitor's published settings
TERMS_EVERY = 60.0


class RunTaken(Exception):
    """Raised in a body's thread when its run was taken from this copy."""


class LeaseLost(RunTaken):
    """Raised in a body's thread when its process could not renew its run
    within the self-fencing bound (cut off from the database, or stopped):
    the monitor may take the run soon, so this copy stops counting itself
    its owner before it does. Its end is never the run's outcome."""


def local_clock() -> float:
    """Seconds on a monotonic clock that keeps counting while the host is
    suspended (``CLOCK_BOOTTIME``; elsewhere :func:`time.monotonic`): a
    process frozen with its host still sees the time it missed."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


def _boottime() -> int | None:
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    if clock is None:
        return None
    try:
        time.clock_gettime(clock)
    except OSError:
        return None
    return int(clock)


_BOOTTIME = _boottime()


_Call = tuple[Future[Any], Callable[[], Any]]


class CallTimeout(Exception):
    """A bounded call did not answer in time (the database hangs)."""


class BoundedCalls:
    """Calls made by one daemon thread, waited for at most a given time.

    :meth:`submit` queues a call and returns its :class:`Future`;
    :meth:`call` waits for it at most ``timeout`` seconds and raises
    :class:`CallTimeout` past that (the call goes on in the thread: a call
    that hangs holds up the ones queued behind it, which time out too, as
    they should while the database hangs). The thread is a daemon: a call
    that never returns never keeps the process from exiting."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            self._ensure_thread()
            self._queue.put((future, fn))
        return future

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        future = self.submit(fn)
        try:
            return future.result(timeout=max(0.0, timeout))
        except FutureTimeout:
            future.cancel()  # still queued: never made
            raise CallTimeout(f"no answer within {timeout:.1f} s") from None

    def close(self) -> None:
        """End the thread once the calls queued before are made (a call
        submitted later starts another)."""
        with self._lock:
            self._queue.put(None)  # the thread drains its queue, then ends
            self._queue, self._thread = queue.SimpleQueue(), None

    def _ensure_thread(self) -> None:
        """(lock held) A thread reads the current queue."""
        if self._pid != os.getpid():  # a forked child: the parent's thread is not here
            self._pid, self._thread = os.getpid(), None
            self._queue = queue.SimpleQueue()
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, args=(self._queue,), name=self.name, daemon=True
            )
            self._thread.start()

    def _run(self, calls: queue.SimpleQueue[_Call | None]) -> None:
        while True:
            queued = calls.get()
            if queued is None:  # closed
                return
            future, fn = queued
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as error:  # handed to the waiter
                future.set_exception(error)


class TermsCache:
    """The monitor's published settings (:class:`LeaseTerms`) as this
    process last read them: :data:`DEFAULT_TERMS` until it could; read
    again every :data:`TERMS_EVERY` seconds (:meth:`due`)."""

    def __init__(self, read: Callable[[], LeaseTerms | None]) -> None:
        self._read = read
        self.terms = DEFAULT_TERMS
        self.read_at: float | None = None

    def due(self, now: float) -> bool:
        return self.read_at is None or now - self.read_at >= TERMS_EVERY

    def refresh(self, now: float) -> LeaseTerms:
        """Read the settings (in the caller's thread); on failure keep the
        last ones (logged at most once a minute) and try again next time."""
        try:
            found = self._read()
        except (SchedulerError, CallTimeout) as error:
            _unread.log(
                "could not read the monitor's steal settings (%s): the bodies of this "
                "process fence themselves %.1f s after their last renewal",
                error,
                self.terms.bound,
                key="terms",
            )
            if self.read_at is None:
                self.read_at = now - TERMS_EVERY + 5.0  # try again soon
            return self.terms
        _unread.ok("terms")
        self.read_at = now
        terms = found or DEFAULT_TERMS
        if terms != self.terms:
            logger.info(
                "the monitor takes a run after %s without renewal plus %s of grace: "
                "this process stops counting a body as its run's owner %.1f s after "
                "its last renewal",
                terms.ping_timeout,
                terms.grace,
                terms.bound,
            )
        self.terms = terms
        return terms


__all__ = [
    "TERMS_EVERY",
    "BoundedCalls",
    "CallTimeout",
    "LeaseLost",
    "RunTaken",
    "TermsCache",
    "local_clock",
]
