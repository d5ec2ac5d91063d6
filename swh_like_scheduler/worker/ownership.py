"""Whether this copy still owns its runs: the heartbeat's self-fencing,
stalls, and the questions a body asks before its end or a side effect.

:class:`Ownership` is the half of :class:`~.heartbeat.Heartbeat` that
decides, for each run a worker process holds, whether the process may
still count itself its owner (module doc of :mod:`.heartbeat`). Nothing
here waits on the database for longer than the time left before a run's
self-fencing bound: the store is asked through :class:`~.fencing.BoundedCalls`.

* :meth:`Ownership.watch` (the heartbeat's thread, at each wake-up, and in
  every question below): a running body whose run has not been renewed for
  the bound is fenced: :class:`~.fencing.LeaseLost` is raised in its thread;
* :meth:`Ownership.verdict`: what a body's end is, without asking anyone;
* :meth:`Ownership.confirm`: before a body's success is reported; asks the
  database when a stall was seen since the run's last renewal;
* :meth:`Ownership.check`: before a side effect (``self.fence.check()``):
  the task's fencing token in the database must still be this start's.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery.exceptions import Ignore, Reject, SoftTimeLimitExceeded

from ..domain.exceptions import SchedulerError
from ..domain.fencing import overdue, renewal_period, stall_slack
from ..domain.model import RunStatus
from ..domain.records import Renewal
from ..listener.events import error_text, jsonable, status_of_result
from ..plumbing.quietlog import QuietLog
from ..store import SQLAlchemyStore
from .fencing import BoundedCalls, CallTimeout, LeaseLost, RunTaken, TermsCache

logger = logging.getLogger(__name__)
_unanswered = QuietLog(logger, logging.WARNING)

#: longest a body waits for the database to confirm its run (an end after
#: a stall, ``fence.check()``), and never past its self-fencing bound
CHECK_WAIT = 5.0
#: shortest sleep of the heartbeat's thread (a deadline just passed)
MIN_WAIT = 0.02


@dataclass(frozen=True)
class BodyOutcome:
    """A body's end, kept as it came (read only if the worker must record
    it): the value it returned, or the exception it raised."""

    value: Any = None
    exception: BaseException | None = None

    def recorded(self) -> tuple[RunStatus, Any, str | None] | None:
        """(status, result, error) as the listener would record them from
        Celery's events; ``None`` for an end that records nothing (Celery's
        ``Ignore`` and ``Reject``: no event either)."""
        exc = self.exception
        if exc is None:
            status, invalid = status_of_result(self.value)
            return status, jsonable(self.value), invalid
        if isinstance(exc, Ignore | Reject):
            return None
        if isinstance(exc, SoftTimeLimitExceeded):
            why = f"stopped by its soft time limit (the type's max_allowed_duration): {exc!r}"
            return RunStatus.TIMED_OUT, None, error_text(why)
        return RunStatus.FAILED, None, error_text(repr(exc))


@dataclass
class Held:
    """One run a worker process holds."""

    tag: str
    thread_id: int
    stop_when_taken: bool
    since: float  # monotonic: start or last successful renewal, as sent
    running: bool = True
    taken: bool = False  # the store said the run is this copy's no more
    fenced: bool = False  # not renewed within the bound: this copy's no more
    suspect: bool = False  # a stall was seen since the last renewal
    injected: bool = False  # RunTaken (LeaseLost) raised in the body's thread
    outcome: BodyOutcome | None = None
    ended_at: float = 0.0


def inject(thread_id: int, error: type[BaseException] | None) -> None:
    """Raise ``error`` in the thread ``thread_id`` at its next bytecode
    (``None``: withdraw one not delivered yet)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(error) if error is not None else None
    )


class Ownership:
    """Self-fencing and stalls, for the runs of :class:`~.heartbeat.Heartbeat`
    (module doc). The attributes are the heartbeat's."""

    store: SQLAlchemyStore
    every: float
    terms: TermsCache
    calls: BoundedCalls
    _entries: dict[str, Held]
    _lock: threading.Lock
    _clock: Callable[[], float]
    _thread: threading.Thread | None
    _woke: float | None
    _planned: float
    #: longest a body waits for the database's answer (never past its bound)
    check_wait: float = CHECK_WAIT

    @property
    def bound(self) -> float:
        """Seconds a running body's run may go without a successful renewal
        before this copy stops counting itself its owner."""
        return self.terms.terms.bound

    @property
    def period(self) -> float:
        """Seconds a run goes before it is renewed: ``every``, or half of
        :attr:`bound` when that is shorter."""
        return renewal_period(self.every, self.bound)

    # -- local: no I/O -----------------------------------------------------------

    def watch(self, now: float | None = None) -> tuple[str, ...]:
        """Fence every running body whose run has not been renewed within
        the bound at ``now``; the runs fenced now."""
        now = self._clock() if now is None else now
        bound = self.bound
        with self._lock:
            return tuple(
                backend_id
                for backend_id, entry in self._entries.items()
                if self._fence_if_overdue(backend_id, entry, now, bound)
            )

    def verdict(self, backend_id: str) -> type[RunTaken] | None:
        """Whether the body of ``backend_id`` (ending now) lost its run, by
        what this process knows: :class:`RunTaken` (the store said so),
        :class:`LeaseLost` (fenced, now or before), ``None`` (still its own,
        or not held here). Never asks the database. Judges this run only:
        the ended runs this process still renews stay among the entries
        until their ends are recorded (thousands, in a burst of short runs),
        and the heartbeat's thread watches the others (:meth:`watch`)."""
        now, bound = self._clock(), self.bound
        with self._lock:
            entry = self._entries.get(backend_id)
            if entry is None:
                return None
            self._fence_if_overdue(backend_id, entry, now, bound)
            if entry.fenced:
                return LeaseLost
            return RunTaken if entry.taken else None

    def next_wait(self, now: float) -> float:
        """How long the heartbeat's thread may sleep: half a renewal period
        (a run is renewed at most 1.5 periods after its last renewal, and
        tried again half a period after a failure), or until the first
        bound a running body reaches, whichever comes first."""
        bound = self.bound
        wait = self.period / 2
        with self._lock:
            for entry in self._entries.values():
                if entry.running and not (entry.taken or entry.fenced):
                    wait = min(wait, entry.since + bound - now)
        return max(MIN_WAIT, wait)

    def late(self, now: float) -> bool:
        """Whether the heartbeat's thread has not woken as it planned (the
        process was stalled and it has not run since)."""
        thread, woke = self._thread, self._woke
        if thread is None or not thread.is_alive() or woke is None:
            return False
        return now - woke > self._planned + stall_slack(self._planned)

    def stalled(self, seconds: float) -> None:
        """The heartbeat's thread woke ``seconds`` late: the runs held are
        suspect until a renewal succeeds (their ends ask the database)."""
        with self._lock:
            running = [b for b, e in self._entries.items() if e.running]
            for backend_id in running:
                self._entries[backend_id].suspect = True
        if running:
            logger.warning(
                "this process was stalled for %.1f s (stopped, frozen or starved): the %d "
                "run(s) it holds are checked with the database before a body's end counts",
                seconds,
                len(running),
            )

    def _fence_if_overdue(self, backend_id: str, entry: Held, now: float, bound: float) -> bool:
        """(lock held) Fence the running body of ``backend_id`` if its run
        went unrenewed past ``bound`` at ``now``; whether it was fenced now."""
        live = entry.running and not (entry.taken or entry.fenced)
        if live and overdue(entry.since, now, bound):
            self._fence(backend_id, entry, now - entry.since)
            return True
        return False

    def _fence(self, backend_id: str, entry: Held, silent: float) -> None:
        """(lock held) This copy stops counting itself the owner of ``backend_id``."""
        entry.fenced = True  # never renewed again
        logger.warning(
            "run %s: no renewal succeeded for %.1f s (this process is cut off from the "
            "database, or was stopped), past the self-fencing bound of %.1f s: the monitor "
            "may give the run to another copy, or has already. This copy no longer owns it; "
            "its end will not count%s",
            backend_id,
            silent,
            self.bound,
            "; stopping the body" if entry.stop_when_taken else "",
        )
        # (in the body's own thread, its caller raises: nothing to inject)
        if entry.stop_when_taken and entry.running and entry.thread_id != threading.get_ident():
            entry.injected = True
            inject(entry.thread_id, LeaseLost)

    def _taken(self, backend_id: str, entry: Held, *, stop: bool = True) -> None:
        """(lock held) Tell the running body its run is gone (``stop``: raise
        :class:`RunTaken` in its thread, if its class wants it)."""
        entry.taken = True  # never renewed again
        logger.warning(
            "run %s was taken from this copy (this process gave no sign of life in time: "
            "stopped, frozen or cut off); another copy may run now. "
            "Its end will not count as the task's outcome%s",
            backend_id,
            "; stopping the body" if stop and entry.stop_when_taken else "",
        )
        # once only: a body already stopped (fenced while this renewal was
        # on its way) must not be hit again in its own except or finally
        if stop and entry.stop_when_taken and not entry.injected:
            entry.injected = True
            inject(entry.thread_id, RunTaken)

    # -- asking the database ------------------------------------------------------

    def confirm(self, backend_id: str) -> None:
        """Called in the body's thread when the body of ``backend_id``
        returned, before its success is reported: raise :class:`RunTaken`
        or :class:`LeaseLost` when this copy no longer owns the run. Asks
        the database (one renewal) only when a stall was seen since the
        run's last renewal, or the heartbeat's thread is late; when the
        database does not answer in time, the bound decides."""
        lost = self.verdict(backend_id)
        if lost is not None:
            raise lost(f"run {backend_id}: this copy no longer owns its run")
        with self._lock:
            entry = self._entries.get(backend_id)
            if entry is None or not (entry.suspect or self.late(self._clock())):
                return
        answer = self.renew_now(backend_id)
        if answer is Renewal.TAKEN:
            raise RunTaken(f"run {backend_id} was taken from this copy")
        lost = self.verdict(backend_id)
        if answer is None and lost is not None:
            raise lost(f"run {backend_id}: this copy no longer owns its run")

    def renew_now(self, backend_id: str) -> Renewal | None:
        """Renew ``backend_id`` at once (waiting at most until its bound):
        the store's answer, ``None`` when it gave none in time. ``ok``:
        the run's bound counts again from now; ``taken``: the copy knows
        (nothing raised in the body: the caller does)."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(backend_id)
            if entry is None or entry.taken or entry.fenced:
                return None
            # (a renewal that succeeds proves the run is still this copy's,
            # even past the bound; it is not waited for past half of it more)
            tag, left = entry.tag, max(entry.since + self.bound - now, self.bound / 2)
        try:
            answer = self.calls.call(
                lambda: self.store.renew_runs([(backend_id, tag)]), min(self.check_wait, left)
            ).get(backend_id)
        except (SchedulerError, CallTimeout) as error:
            self._unanswered(backend_id, error)
            return None
        with self._lock:
            if self._entries.get(backend_id) is not entry:
                return answer
            if answer is Renewal.OK and not entry.fenced:
                entry.since, entry.suspect = max(entry.since, now), False
            elif answer is Renewal.TAKEN and not entry.taken:
                self._taken(backend_id, entry, stop=False)
        return answer

    def check(self, backend_id: str, task_id: int, token: int) -> None:
        """``self.fence.check()`` of the body of ``backend_id`` (called in its
        thread): raise :class:`LeaseLost` when this copy fenced itself, and
        :class:`RunTaken` when the store said the run is not its own or the
        task's fencing token in the database is no longer ``token``. One
        read by primary key; when the database does not answer in time,
        the run cannot have been taken yet (its bound has not passed) and
        the check passes."""
        lost = self.verdict(backend_id)
        if lost is not None:
            raise lost(f"run {backend_id}: this copy no longer owns its run")
        now = self._clock()
        with self._lock:
            entry = self._entries.get(backend_id)
            left = self.check_wait if entry is None else entry.since + self.bound - now
        try:
            current = self.calls.call(
                lambda: self.store.current_fence(task_id), min(self.check_wait, left)
            )
        except (SchedulerError, CallTimeout) as error:
            self._unanswered(backend_id, error)
            lost = self.verdict(backend_id)
            if lost is not None:
                raise lost(f"run {backend_id}: this copy no longer owns its run") from error
            return
        if current == token:
            return
        with self._lock:
            entry = self._entries.get(backend_id)
            if entry is not None and entry.running and not entry.taken:
                self._taken(backend_id, entry, stop=False)  # raised here, not injected
        raise RunTaken(
            f"run {backend_id}: its task's fencing token is {current}, no longer this "
            f"copy's {token}: the run was taken from it"
        )

    def _unanswered(self, backend_id: str, error: Exception) -> None:
        _unanswered.log(
            "run %s: the database did not confirm the run is still this copy's (%s); "
            "within its self-fencing bound it is",
            backend_id,
            error,
            key="unanswered",
        )


__all__ = ["CHECK_WAIT", "BodyOutcome", "Held", "Ownership", "inject"]
