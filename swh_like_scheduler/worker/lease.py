"""The worker's half of the lease: a Celery base class for task types that opt in.

Usage in a task module::

    @shared_task(base=LeasedTask, bind=True, name="...")
    def crawl(self, url):
        for page in pages(url):
            if self.lease.should_stop:   # cooperative stop (optional)
                break
            self.lease.report(progress)  # sent with the next ping (optional)

Around the body, each delivery:

1. passes the start guard of every task type
   (:class:`~swh_like_scheduler.worker.SchedulerTask`) as a lease: the same
   checks and refusals (a refused delivery ends with :class:`LeaseRefused`,
   a :class:`~swh_like_scheduler.worker.StartRefused`: no body, no
   succeeded/failed event), and the owner now pings;
2. runs the body while a daemon thread pings every ``swh_scheduler_lease_ping``
   seconds (Celery setting; default 10). When a ping says stop (stolen,
   cancelled, blackout, finished) or ``max_allowed_duration`` has passed on
   the database's clock, the body is stopped: ``self.lease.should_stop``
   becomes true, and (hard stop, :attr:`LeasedTask.hard_stop`) the
   exception :class:`LeaseStopped` is raised asynchronously in the worker
   thread (``PyThreadState_SetAsyncExc``). It is delivered when the thread
   next runs Python code, so a body blocked in one long C call (a 10-minute
   ``time.sleep``, a socket read without timeout) stops only when that call
   returns;
3. writes the end itself (:meth:`finish_lease`): the outcome is recorded even
   when the listener misses the Celery events (Redis events are lossy); the
   listener then finds the run already ended. A stop ends ``cancelled``
   (cancellation), ``failed`` (a blackout window began: the run counts as a
   failure and is retried after the window), ``timed_out`` (duration exceeded) or nothing
   (stolen: the monitor already ended it ``lost``), then re-raises
   :class:`LeaseStopped` so Celery records a failure.
4. after a good return, sends the ``task-result`` event with the real return
   value (:class:`~swh_like_scheduler.worker.ResultEventTask`): the
   listener then finds the run already ended, unless the final write failed.

**Self-fencing.** A lease whose pings have not succeeded for the bound the
monitor's published settings give (as for every guarded run: see
:mod:`.heartbeat`) stops (``lease_lost``): :class:`~.fencing.LeaseLost` is
raised in the body, no final write is made, and its end is no outcome of
the task. The pings go through the process's bounded calls, so a database
that hangs never keeps the lease from stopping in time. A body that returns
after its run was taken (its final write finds another owner) reports
:class:`~.fencing.RunTaken` instead of its success.

On a warm shutdown (``worker_shutting_down``) the leases held by this
process are yielded (:meth:`yield_lease`: run ``lost``, history ``yielded``,
task runnable at once) and their bodies stopped. Celery sends that signal in
the worker's main process: leases are seen there with the ``solo`` and
``threads`` pools; with ``prefork`` the children keep running until their
next ping, which finds the task no longer theirs.

The store is the start guard's (:mod:`swh_like_scheduler.worker.guard`).
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any, ClassVar

from celery.signals import worker_shutting_down

from ..domain.exceptions import InvalidInput, SchedulerError
from ..domain.fencing import overdue, renewal_period
from ..domain.lease import LeaseGrant, PingAnswer
from ..domain.model import RunStatus, TaskRun
from ..listener.events import jsonable
from ..plumbing.quietlog import QuietLog
from ..policy import classify_result, max_allowed_duration, max_expected_duration
from ..store import SQLAlchemyStore
from ..store.interface import ApplyOutcome
from .fencing import CallTimeout, LeaseLost, RunTaken, local_clock
from .guard import Fence, SchedulerTask, StartRefused, fence_of
from .heartbeat import Heartbeat
from .ownership import CHECK_WAIT

logger = logging.getLogger(__name__)
#: every leased run pings: during an outage, one line a minute
_ping_failed = QuietLog(logger, logging.WARNING)

DEFAULT_PING = 10.0
#: the stop reason of a lease whose process fenced itself
LEASE_LOST = "lease_lost"


class LeaseRefused(StartRefused):
    """The lease was refused: the body did not run (see :attr:`reason`)."""


class LeaseStopped(Exception):
    """Raised in the body's thread when the run must stop."""


#: Why a run is stopped, and the final status the owner writes for it
#: (``None``: the owner no longer owns the task and writes nothing).
_STOP_STATUS: dict[str, RunStatus | None] = {
    PingAnswer.STOLEN: None,
    PingAnswer.FINISHED: None,
    PingAnswer.CANCELLED: RunStatus.CANCELLED,
    PingAnswer.BLACKOUT: RunStatus.FAILED,
    "timed_out": RunStatus.TIMED_OUT,
    "yielded": None,
    LEASE_LOST: None,
}


class Lease:
    """One held lease: what the body sees as ``self.lease``."""

    def __init__(
        self,
        backend_id: str,
        tag: str,
        grant: LeaseGrant,
        thread_id: int,
        renewed_at: float | None = None,
    ) -> None:
        self.backend_id = backend_id
        self.tag = tag
        self.grant = grant
        self.thread_id = thread_id
        #: when the last ping that succeeded was sent (the start request
        #: before any), on :func:`~.fencing.local_clock`
        self.renewed_at = local_clock() if renewed_at is None else renewed_at
        #: the process's heartbeat: the monitor's terms, the bounded calls
        self.heartbeat: Heartbeat | None = None
        self.stop_reason: str | None = None
        self.progress: float | None = None
        self._stop = threading.Event()
        self._guard = threading.Lock()
        self._body_running = False
        self._injected = False

    @property
    def should_stop(self) -> bool:
        """True once the run must stop (the body may check it between steps)."""
        return self._stop.is_set()

    def report(self, progress: float) -> None:
        """Record the body's progress (0..1), sent with the next ping."""
        if not 0.0 <= progress <= 1.0:
            raise InvalidInput("progress", f"{progress} is not between 0 and 1")
        self.progress = progress

    def stop(self, reason: str, *, hard: bool) -> None:
        """Ask the body to stop (first reason wins); with ``hard``, also raise
        :class:`LeaseStopped` in its thread while it is in the body."""
        with self._guard:
            if self.stop_reason is None:
                self.stop_reason = reason
            self._stop.set()
            if hard and self._body_running and not self._injected:
                self._injected = True
                _async_raise(self.thread_id, LeaseStopped)

    def _enter_body(self) -> None:
        with self._guard:
            self._body_running = True

    def _leave_body(self) -> None:
        with self._guard:
            self._body_running = False
            if self._injected:  # not delivered yet: withdraw it
                _async_raise(self.thread_id, None)


def _async_raise(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )


# -- per-process state ----------------------------------------------------------

_held: dict[str, tuple[Lease, SQLAlchemyStore, ApplyOutcome]] = {}
_held_lock = threading.Lock()


@worker_shutting_down.connect
def _yield_on_warm_shutdown(**_: Any) -> None:
    with _held_lock:
        held = list(_held.values())
    for lease, store, apply in held:
        lease.stop("yielded", hard=True)
        try:
            store.yield_lease(lease.backend_id, tag=lease.tag, apply=apply)
            logger.info("run %s yielded (warm shutdown)", lease.backend_id)
        except SchedulerError:
            logger.exception("run %s: could not yield its lease", lease.backend_id)


class LeasedTask(SchedulerTask):
    """Celery base class of task types that use the lease (module doc)."""

    #: raise :class:`LeaseStopped` in the body's thread when it must stop
    hard_stop: ClassVar[bool] = True
    refused_error: ClassVar[type[StartRefused]] = LeaseRefused
    _local = threading.local()

    @property
    def lease(self) -> Lease:
        """The lease of the run this thread is executing."""
        lease: Lease | None = getattr(self._local, "lease", None)
        if lease is None:
            raise RuntimeError("no lease is held: the task is not running under LeasedTask")
        return lease

    def on_start_refused(self, grant: LeaseGrant) -> None:
        logger.info("run %s: lease refused (%s); not running it", self.request.id, grant.reason)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        backend_id = self.request.id
        if backend_id is None:  # called directly, not through a worker
            return self.run(*args, **kwargs)
        asked = local_clock()
        store, apply, grant, tag = self.guard_start(backend_id, lease=True)
        lease = Lease(backend_id, tag, grant, threading.get_ident(), asked)
        beat = lease.heartbeat = self.heartbeat(store, apply)  # terms and bounded calls
        beat.read_terms(wait=beat.terms.read_at is None)
        if local_clock() - asked >= beat.bound / 2:  # granted as a partition healed?
            _ping_now(beat, store, lease)  # (else fenced at birth)
        self._local.lease = lease
        with _held_lock:
            _held[backend_id] = (lease, store, apply)
        self._held.start = (store, backend_id, tag)
        fence = fence_of(grant)
        if fence is not None:
            fence = replace(fence, _checker=lambda f: _check(beat, lease, f))
        self._held.fence = fence
        done = threading.Event()
        pinger = threading.Thread(
            target=self._ping_loop,
            args=(store, lease, done, beat),
            name=f"lease-ping-{backend_id}",
            daemon=True,
        )
        pinger.start()
        started = time.monotonic()
        try:
            result = self._run_body(store, apply, lease, args, kwargs)
        finally:
            done.set()
            with _held_lock:
                _held.pop(backend_id, None)
            self._held.start = self._held.fence = None
            self._local.lease = None
            pinger.join(timeout=5)
        self.send_result_event(result, runtime=time.monotonic() - started)
        return result

    def _run_body(
        self,
        store: SQLAlchemyStore,
        apply: ApplyOutcome,
        lease: Lease,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        def finish(status: RunStatus, **fields: Any) -> TaskRun | None:
            try:
                return store.finish_lease(
                    lease.backend_id, tag=lease.tag, status=status, apply=apply, **fields
                )
            except SchedulerError:  # the listener's events remain to record it
                logger.exception("run %s: the lease's final write failed", lease.backend_id)
                return None

        try:
            try:
                lease._enter_body()
                result = self.run(*args, **kwargs)
            finally:
                lease._leave_body()
        except LeaseStopped as exc:
            self._stopped(lease, finish)
            if lease.stop_reason == LEASE_LOST:
                raise _stop_error(lease) from exc
            raise
        except Exception as exc:
            if lease.stop_reason is not None:  # the stop broke something on its way out
                self._stopped(lease, finish)
                raise _stop_error(lease) from exc
            finish(RunStatus.FAILED, error=repr(exc)[:2000])
            raise
        if lease.stop_reason is None and self._past_bound(lease):
            lease.stop(LEASE_LOST, hard=False)  # no renewal in time: not its success
        if lease.stop_reason is not None:  # the body noticed should_stop and returned
            self._stopped(lease, finish)
            raise _stop_error(lease)
        try:
            status, error = classify_result(result), None
        except InvalidInput as exc:
            status, error = RunStatus.FAILED, f"the task returned an invalid result: {exc}"
        kept = finish(status, result=jsonable(result), error=error)
        if kept is not None and kept.status in _TAKEN:  # the final write found another owner
            raise RunTaken(f"run {lease.backend_id} was taken from this copy (it is {kept.status})")
        return result

    def _past_bound(self, lease: Lease) -> bool:
        beat = lease.heartbeat
        return beat is not None and overdue(lease.renewed_at, local_clock(), beat.bound)

    def _stopped(self, lease: Lease, finish: Callable[..., object]) -> None:
        reason = lease.stop_reason or "stopped"
        logger.warning("run %s stopped: %s", lease.backend_id, reason)
        status = _STOP_STATUS.get(reason)
        if status is not None:
            finish(status, error=f"stopped by the lease: {reason}")

    def _ping_loop(
        self, store: SQLAlchemyStore, lease: Lease, done: threading.Event, beat: Heartbeat
    ) -> None:
        """Ping every ``swh_scheduler_lease_ping`` seconds (half the
        self-fencing bound at most; half that again after a failed ping)
        through the process's bounded calls;
        stop the lease when a ping says so, when ``max_allowed_duration``
        has passed, or when no ping succeeded within the bound."""
        every = float(self.app.conf.get("swh_scheduler_lease_ping") or DEFAULT_PING)
        grant = lease.grant
        started = grant.db_now
        allowed = expected = None
        if grant.task is not None:
            task = grant.task
            try:
                task_type = beat.calls.call(lambda: store.get_task_type(task.type), CHECK_WAIT)
            except (SchedulerError, CallTimeout):
                task_type = None  # its bounds unknown: pings and stops go on
            if task_type is not None:
                allowed = max_allowed_duration(grant.task, task_type)
                expected = max_expected_duration(grant.task, task_type)
        db_now, local_at = grant.db_now, time.monotonic()
        warned = failed = False
        while True:
            bound = beat.bound
            left = lease.renewed_at + bound - local_clock()
            period = renewal_period(every, bound)
            wait = min(period / 2 if failed else period, left)
            if allowed is not None:  # wake in time to enforce the bound
                elapsed = db_now - started + timedelta(seconds=time.monotonic() - local_at)
                wait = min(wait, (allowed - elapsed).total_seconds())
            if done.wait(max(0.0, wait)):
                return
            sent = local_clock()
            if overdue(lease.renewed_at, sent, bound):
                logger.warning(
                    "run %s: no ping succeeded for %.1f s, past the self-fencing bound of "
                    "%.1f s: this copy no longer owns its run; stopping the body",
                    lease.backend_id,
                    sent - lease.renewed_at,
                    bound,
                )
                lease.stop(LEASE_LOST, hard=self.hard_stop)
                return
            try:
                reply = beat.calls.call(
                    lambda: store.ping_lease(
                        lease.backend_id, tag=lease.tag, progress=lease.progress
                    ),
                    lease.renewed_at + bound - sent,
                )
            except (SchedulerError, CallTimeout) as error:  # tried again until the bound
                _ping_failed.log("run %s: ping failed: %s", lease.backend_id, error)
                failed = True
                continue
            lease.renewed_at, failed = sent, False
            beat.read_terms(wait=False)  # the monitor's settings, every minute
            db_now, local_at = reply.db_now, time.monotonic()
            if not reply.proceed:
                lease.stop(str(reply.reason), hard=self.hard_stop)
                return
            elapsed = reply.db_now - started
            if expected is not None and elapsed > expected and not warned:
                warned = True
                logger.warning(
                    "run %s has run %s, longer than its max_expected_duration %s",
                    lease.backend_id,
                    elapsed,
                    expected,
                )
            if allowed is not None and elapsed >= allowed:
                lease.stop("timed_out", hard=self.hard_stop)
                return


#: what a run is when the lease's final write found it no longer this copy's
_TAKEN = (RunStatus.LOST, RunStatus.SUPERSEDED)


def _stop_error(lease: Lease) -> Exception:
    """What a stopped lease's body ends with: :class:`~.fencing.LeaseLost`
    when its process fenced itself, else :class:`LeaseStopped`."""
    reason = lease.stop_reason or "stopped"
    if reason == LEASE_LOST:
        return LeaseLost(f"run {lease.backend_id}: this copy no longer owns its run")
    return LeaseStopped(reason)


def _ping_now(beat: Heartbeat, store: SQLAlchemyStore, lease: Lease) -> None:
    """Ping once, at most half a bound: a lease whose start took that long
    to answer counts its bound from this ping, when it succeeds."""
    sent = local_clock()
    try:
        reply = beat.calls.call(
            lambda: store.ping_lease(lease.backend_id, tag=lease.tag), beat.bound / 2
        )
    except (SchedulerError, CallTimeout):
        return
    if reply.proceed:
        lease.renewed_at = max(lease.renewed_at, sent)


def _check(beat: Heartbeat, lease: Lease, fence: Fence) -> None:
    """``self.fence.check()`` in a leased body (:meth:`Fence.check`)."""
    if lease.stop_reason == LEASE_LOST or overdue(lease.renewed_at, local_clock(), beat.bound):
        raise LeaseLost(f"run {lease.backend_id}: this copy no longer owns its run")
    if lease.stop_reason in (PingAnswer.STOLEN, "yielded"):
        raise RunTaken(f"run {lease.backend_id} was taken from this copy")
    left = lease.renewed_at + beat.bound - local_clock()
    try:
        current = beat.calls.call(
            lambda: beat.store.current_fence(fence.task_id), min(beat.check_wait, left)
        )
    except (SchedulerError, CallTimeout):
        return  # within its bound, the run cannot have been taken yet
    if current != fence.token:
        raise RunTaken(
            f"run {lease.backend_id}: its task's fencing token is {current}, no longer "
            f"this copy's {fence.token}"
        )


__all__ = ["Lease", "LeaseRefused", "LeaseStopped", "LeasedTask"]
