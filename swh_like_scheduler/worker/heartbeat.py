"""The heartbeat of the process that runs a body: a run is ours while we say so.

A run's liveness comes from the process executing its body, never from the
worker's main process (whose events stop when it alone is stopped, while its
pool processes go on running bodies). Each worker process keeps one daemon
thread, :class:`Heartbeat`, started at its first guarded start. Every
``every`` seconds it renews, in one transaction (:meth:`SchedulerStore.renew_runs`),
the runs this process holds:

* a run whose body is **running**: renewed while it is the copy's. When the
  store answers ``taken`` (the process was silent past the monitor's ping
  timeout and grace: the run ended ``lost`` and the task may have started
  again elsewhere), the body is told: a warning names the run, and unless
  the task class says otherwise (``stop_when_taken``) :class:`RunTaken` is
  raised in the body's thread, as the lease's hard stop does. Its end, if it
  comes, is recorded as ``superseded`` when another copy started since
  (the fencing token): never as a second success.
* a run whose body has **ended** but whose end is not recorded yet (the
  listener records it from Celery's events, within a second when all is
  well): renewed too, so that a listener or broker away for minutes never
  makes a finished run look abandoned. When it is still open ``record_after``
  seconds after the body ended (the events were lost, or consumed by someone
  else), the worker writes the outcome itself (:meth:`finish_lease`, the
  same write as the lease's final one) and lets it go.

A run is renewed first ``every`` seconds after it was taken (or up to half
of that later: the thread wakes twice per ``every``), so a body of a few
seconds whose end is recorded in time costs no write at all. If the
database cannot be reached the renewals are tried again at the next wake-up
(one warning a minute).

**Self-fencing.** The monitor takes a run whose copy has not renewed it for
its ping timeout plus its grace; it publishes both in the database, and
this process reads them (at its first start, then every minute). A running
body whose run this process has not renewed for the bound they give
(:func:`~swh_like_scheduler.domain.fencing.self_fence_bound`: three
quarters of the ping timeout, counted on the process's monotonic clock from
when it sent the last renewal that succeeded, or its start request) is no
longer counted as the run's owner, whatever the database would answer: a
warning names the run and :class:`LeaseLost` (a :class:`RunTaken`) is raised
in its thread, at that instant (the thread wakes for it, and never waits on
the database: renewals are made by another thread, :class:`BoundedCalls`).
Its end never counts: a body that returns anyway has its success replaced
by :class:`LeaseLost`, which the store records ``lost`` (or ``superseded``
once the run was taken). ``every`` is shortened to half the bound when it is
longer, and the thread wakes twice per ``every``: a run is renewed by 3/4
of its bound, and tried again before it if the database did not answer.

**Stalls.** The thread sees a stall (the process stopped, frozen or
starved) as a wake-up that comes late on the monotonic clock; the runs
held then are suspect until a renewal succeeds, and a body that ends while
its run is suspect, or while the thread has not woken as it planned, asks
the database before its success is reported (:meth:`Heartbeat.confirm`).
``self.fence.check()`` asks the same before a side effect
(:meth:`Heartbeat.check`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from celery.signals import worker_process_shutdown

from ..domain.exceptions import SchedulerError
from ..domain.fencing import overdue, stalled_for
from ..domain.records import Renewal
from ..plumbing.quietlog import QuietLog
from ..store import SQLAlchemyStore
from ..store.interface import ApplyOutcome
from .fencing import BoundedCalls, CallTimeout, LeaseLost, RunTaken, TermsCache, local_clock
from .ownership import CHECK_WAIT, BodyOutcome, Held, Ownership, inject

logger = logging.getLogger(__name__)
_unreachable = QuietLog(logger, logging.WARNING)

#: seconds between two beats unless the Celery setting ``swh_scheduler_lease_ping`` says
DEFAULT_EVERY = 10.0
#: most runs renewed in one statement
CHUNK = 1000
#: most ended runs a process keeps renewing (the oldest are let go first)
MAX_ENDED = 100_000


@dataclass
class BeatReport:
    """What one beat did: runs renewed, let go (ended or taken), taken
    while their body ran, and ends the worker recorded itself."""

    renewed: int = 0
    finished: int = 0
    taken: tuple[str, ...] = ()
    recorded: tuple[str, ...] = ()
    fenced: tuple[str, ...] = ()


class Heartbeat(Ownership):
    """The runs one worker process holds, renewed by a daemon thread (module
    doc); whether it still owns them: :class:`~.ownership.Ownership`."""

    def __init__(
        self,
        store: SQLAlchemyStore,
        apply: ApplyOutcome,
        *,
        every: float = DEFAULT_EVERY,
        record_after: float | None = None,
        clock: Callable[[], float] = local_clock,
        background: bool = True,
    ) -> None:
        if not every > 0:
            raise ValueError(f"swh_scheduler_lease_ping: {every} must be longer than zero")
        self.store = store
        self.apply = apply
        self.every = float(every)
        self.record_after = float(record_after if record_after is not None else 3 * every)
        self._clock = clock
        self._entries: dict[str, Held] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        #: beat in a daemon thread of its own (else the caller calls :meth:`beat`)
        self.background = background
        #: the monitor's published settings, read in the thread that calls the store
        self.terms = TermsCache(store.lease_terms)
        #: the calls to the store, made by a thread no caller waits on for long
        self.calls = BoundedCalls(f"swh-heartbeat-db-{os.getpid()}")
        self._beating: Future[BeatReport] | None = None
        self._reading: Future[object] | None = None
        #: when the thread woke last, and how long it then meant to sleep
        self._woke: float | None = None
        self._planned = 0.0

    # -- the body's side ------------------------------------------------------

    def hold(
        self,
        backend_id: str,
        tag: str,
        *,
        stop_when_taken: bool = True,
        since: float | None = None,
    ) -> None:
        """The body of ``backend_id`` starts in this thread under ``tag``;
        ``since``: when the start was asked of the database (this
        heartbeat's clock; default now), from which its bound counts (when
        the answer took half the bound or more, the run is renewed at once,
        so that a start granted as a partition heals is not fenced at birth).

        Raises :class:`RunTaken` when that renewal says the run was taken
        meanwhile (the process was stopped or cut off between the grant and
        its answer, long enough for the monitor to take the run), and
        :class:`LeaseLost` when the start is already past its bound with no
        renewal answered: the body must not begin, whatever its class's
        ``stop_when_taken`` (another copy may be running). The run stays
        held: the caller reports the exception as the body's outcome
        (:meth:`ended`)."""
        now = self._clock()
        self.read_terms(wait=self.terms.read_at is None)  # (the first start waits for them)
        entry = Held(tag, threading.get_ident(), stop_when_taken, now if since is None else since)
        with self._lock:
            self._entries[backend_id] = entry
        self._ensure_thread()
        if now - entry.since >= self.bound / 2:  # the start was slow to answer: renew now
            self.renew_now(backend_id)
            lost = self.verdict(backend_id)  # (RunTaken once the renewal said taken)
            if lost is not None:
                raise lost(
                    f"run {backend_id}: this copy lost its run before its body began (its "
                    f"start was answered {now - entry.since:.1f} s after it was asked)"
                )

    def read_terms(self, *, wait: bool) -> None:
        """Read the monitor's published settings when due (every minute):
        ``wait``, for at most a few seconds (a process's first start);
        else in the background (the lease's pings)."""
        now = self._clock()
        if not self.terms.due(now):
            return
        if not wait:
            if self._reading is None or self._reading.done():
                self._reading = self.calls.submit(lambda: self.terms.refresh(now))
            return
        with contextlib.suppress(CallTimeout):  # the defaults meanwhile: read again later
            self.calls.call(lambda: self.terms.refresh(now), CHECK_WAIT)

    def ended(self, backend_id: str, outcome: BodyOutcome | None) -> None:
        """The body of ``backend_id`` ended with ``outcome``: renew its run
        until its end is recorded, or record it after ``record_after``
        (``None``: an outcome the worker cannot tell; renewed, never
        recorded here). Called in the body's thread: a :class:`RunTaken`
        not delivered yet is withdrawn."""
        with self._lock:
            entry = self._entries.get(backend_id)
            if entry is None or not entry.running:
                return
            entry.running = False
            if entry.taken or entry.fenced:
                if entry.injected:  # not delivered: it must not hit what comes next
                    inject(entry.thread_id, None)
                del self._entries[backend_id]
                return
            entry.outcome = outcome
            entry.ended_at = self._clock()
            if len(self._entries) > MAX_ENDED:
                self._forget_oldest_ended()

    def release(self, backend_id: str) -> None:
        """Stop renewing ``backend_id`` (its run was given back: a retry).
        Called in the body's thread."""
        with self._lock:
            entry = self._entries.pop(backend_id, None)
            if entry is not None and entry.running and entry.injected:
                inject(entry.thread_id, None)

    def held(self) -> dict[str, str]:
        """The runs held now, by backend id, with their tags."""
        with self._lock:
            return {b: e.tag for b, e in self._entries.items()}

    def _forget_oldest_ended(self) -> None:
        ended = sorted((e.ended_at, b) for b, e in self._entries.items() if e.outcome is not None)
        for _, backend_id in ended[: len(self._entries) - MAX_ENDED]:
            del self._entries[backend_id]
        logger.warning(
            "more than %d runs ended in this process without their end being recorded: "
            "the oldest are no longer renewed (is the listener running?)",
            MAX_ENDED,
        )

    # -- the thread -------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if not self.background or (self._thread is not None and self._thread.is_alive()):
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._woke = None  # (the new thread's own, once it runs)
            self._thread = threading.Thread(
                target=self._run, name=f"swh-heartbeat-{os.getpid()}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        """Wake for each beat and each running body's bound; watch for
        stalls and fence what is due (never waiting on the database); the
        beats themselves are made by :attr:`calls`' thread, one at a time."""
        self._woke = self._clock()
        while True:
            wait = self._planned = self.next_wait(self._woke)
            if self._stop.wait(wait):
                return
            now = self._clock()
            late = stalled_for(self._woke + wait, now, wait)
            self._woke = now
            try:
                if late:
                    self.stalled(late)
                self.watch(now)
            except Exception:  # a bug: logged, and the next wake-up tries again
                logger.exception("heartbeat: watching the runs failed")
            if self._beating is None or self._beating.done():
                self._beating = self.calls.submit(self._logged_beat)
            with self._lock:
                if not self._entries:  # nothing held: the next hold starts another
                    self._thread = None
                    return

    def _logged_beat(self) -> BeatReport:
        try:
            return self.beat()
        except Exception:  # a bug: logged, and the next beat tries again
            logger.exception("heartbeat: a beat failed")
            return BeatReport()

    def close(self) -> None:
        """Stop the thread and forget every run held (a worker process
        simply exits; an embedding application may call it)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        with self._lock:
            self._entries.clear()
        self.calls.close()

    # -- one beat ---------------------------------------------------------------

    def beat(self) -> BeatReport:
        """Read the monitor's terms when due; fence the running bodies past
        their bound; renew the runs due (held for :attr:`period` since
        taken or last renewed), act on the answers, record the ends left
        unrecorded. Calls the store in the caller's thread."""
        now = self._clock()
        if self.terms.due(now):
            self.terms.refresh(now)
        report = BeatReport(fenced=self.watch(now))
        period = self.period
        with self._lock:
            due = {
                b: e
                for b, e in self._entries.items()
                if not (e.taken or e.fenced) and overdue(e.since, now, period)
            }
        if not due:
            return report
        answers: dict[str, Renewal] = {}
        items = [(b, e.tag) for b, e in due.items()]
        try:
            for start in range(0, len(items), CHUNK):
                answers.update(self.store.renew_runs(items[start : start + CHUNK]))
        except SchedulerError as error:
            _unreachable.log(
                "heartbeat: could not renew %d run(s) (%s); trying again in %.0f s",
                len(items),
                error,
                self.every,
                key="database",
            )
            return report
        _unreachable.ok("database")
        taken: list[str] = []
        to_record: list[tuple[str, Held]] = []
        with self._lock:
            for backend_id, answer in answers.items():
                entry = self._entries.get(backend_id)
                if entry is None or entry is not due[backend_id]:
                    continue  # released or taken again meanwhile
                if answer is Renewal.OK:
                    report.renewed += 1
                    entry.since, entry.suspect = now, False  # (now: before it was sent)
                    if entry.outcome is not None and now - entry.ended_at >= self.record_after:
                        to_record.append((backend_id, entry))
                    continue
                if answer is Renewal.TAKEN and entry.running:
                    taken.append(backend_id)
                    self._taken(backend_id, entry)  # left for ``ended`` to forget
                else:
                    del self._entries[backend_id]
                    report.finished += 1
        report.taken = tuple(taken)
        report.recorded = tuple(b for b, e in to_record if self._record(b, e))
        return report

    def flush(self) -> tuple[str, ...]:
        """The process is about to exit: record now the ends of the runs
        whose body ended and whose end is not recorded yet (nobody would
        renew them any more, and their events may come late or never)."""
        with self._lock:
            ended = {
                b: e for b, e in self._entries.items() if e.outcome is not None and not e.taken
            }
        if not ended:
            return ()
        items = [(b, e.tag) for b, e in ended.items()]
        try:
            answers: dict[str, Renewal] = {}
            for start in range(0, len(items), CHUNK):
                answers.update(self.store.renew_runs(items[start : start + CHUNK]))
        except SchedulerError as error:
            logger.warning("heartbeat: at exit, could not read %d run(s): %s", len(items), error)
            return ()
        return tuple(
            b
            for b, answer in answers.items()
            if answer is Renewal.OK and self._record(b, ended[b], when="before the process exits")
        )

    def _record(self, backend_id: str, entry: Held, *, when: str = "") -> bool:
        assert entry.outcome is not None
        outcome = entry.outcome.recorded()
        if outcome is None:  # nothing to record: let it go (the monitor decides)
            with self._lock:
                if self._entries.get(backend_id) is entry:
                    del self._entries[backend_id]
            return False
        status, result, why = outcome
        try:
            run = self.store.finish_lease(
                backend_id,
                tag=entry.tag,
                status=status,
                result=result,
                error=why,
                apply=self.apply,
            )
        except SchedulerError as error:
            _unreachable.log(
                "heartbeat: could not record the end of run %s (%s)",
                backend_id,
                error,
                key="database",
            )
            return False
        with self._lock:
            if self._entries.get(backend_id) is entry:
                del self._entries[backend_id]
        if run is not None and run.status is status:
            logger.warning(
                "run %s: its end (%s) was not recorded %s (Celery's events late, lost, or "
                "read by another listener): recorded by the worker",
                backend_id,
                status,
                when or f"within {self.record_after:.0f} s of the body's end",
            )
            return True
        return False


_beats: dict[tuple[int, int], Heartbeat] = {}
_beats_lock = threading.Lock()


def heartbeat_of(store: SQLAlchemyStore) -> Heartbeat | None:
    """This process's heartbeat for ``store``, if one was made."""
    with _beats_lock:
        return _beats.get((os.getpid(), id(store)))


def heartbeat_for(
    store: SQLAlchemyStore, apply: ApplyOutcome, *, every: float, record_after: float | None
) -> Heartbeat:
    """This process's heartbeat for ``store`` (one per process and store)."""
    key = (os.getpid(), id(store))
    with _beats_lock:
        found = _beats.get(key)
        if found is None:
            found = _beats[key] = Heartbeat(store, apply, every=every, record_after=record_after)
        return found


def flush_all(**_: Any) -> None:
    """Flush every heartbeat of this process (:meth:`Heartbeat.flush`): at
    exit, and when a prefork pool process ends (``worker_process_shutdown``:
    it leaves through ``os._exit``, without ``atexit``)."""
    pid = os.getpid()
    with _beats_lock:
        beats = [beat for (owner, _), beat in _beats.items() if owner == pid]
    for beat in beats:
        try:
            beat.flush()
        except Exception:  # exiting: log, never raise
            logger.exception("heartbeat: could not flush the ended runs at exit")


def close_all() -> None:
    """Close and forget every heartbeat of this process (:meth:`Heartbeat.close`)."""
    pid = os.getpid()
    with _beats_lock:
        mine = [key for key in _beats if key[0] == pid]
        beats = [_beats.pop(key) for key in mine]
    for beat in beats:
        beat.close()


atexit.register(flush_all)
worker_process_shutdown.connect(flush_all, weak=False)

__all__ = [
    "BeatReport",
    "BodyOutcome",
    "Heartbeat",
    "LeaseLost",
    "RunTaken",
    "close_all",
    "flush_all",
    "heartbeat_for",
    "heartbeat_of",
]
