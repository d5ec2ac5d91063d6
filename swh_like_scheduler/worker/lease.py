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
from datetime import timedelta
from typing import Any, ClassVar

from celery.signals import worker_shutting_down

from ..domain.exceptions import InvalidInput, SchedulerError
from ..domain.lease import LeaseGrant, PingAnswer
from ..domain.model import RunStatus
from ..listener.events import jsonable
from ..plumbing.quietlog import QuietLog
from ..policy import classify_result, max_allowed_duration, max_expected_duration
from ..store import SQLAlchemyStore
from ..store.interface import ApplyOutcome
from .guard import SchedulerTask, StartRefused, fence_of

logger = logging.getLogger(__name__)
#: every leased run pings: during an outage, one line a minute
_ping_failed = QuietLog(logger, logging.WARNING)

DEFAULT_PING = 10.0


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
}


class Lease:
    """One held lease: what the body sees as ``self.lease``."""

    def __init__(self, backend_id: str, tag: str, grant: LeaseGrant, thread_id: int) -> None:
        self.backend_id = backend_id
        self.tag = tag
        self.grant = grant
        self.thread_id = thread_id
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
        store, apply, grant, tag = self.guard_start(backend_id, lease=True)
        lease = Lease(backend_id, tag, grant, threading.get_ident())
        self._local.lease = lease
        with _held_lock:
            _held[backend_id] = (lease, store, apply)
        self._held.start = (store, backend_id, tag)
        self._held.fence = fence_of(grant)
        done = threading.Event()
        pinger = threading.Thread(
            target=self._ping_loop,
            args=(store, lease, done),
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
        def finish(status: RunStatus, **fields: Any) -> None:
            try:
                store.finish_lease(
                    lease.backend_id, tag=lease.tag, status=status, apply=apply, **fields
                )
            except SchedulerError:  # the listener's events remain to record it
                logger.exception("run %s: the lease's final write failed", lease.backend_id)

        try:
            try:
                lease._enter_body()
                result = self.run(*args, **kwargs)
            finally:
                lease._leave_body()
        except LeaseStopped:
            self._stopped(lease, finish)
            raise
        except Exception as exc:
            if lease.stop_reason is not None:  # the stop broke something on its way out
                self._stopped(lease, finish)
                raise LeaseStopped(lease.stop_reason) from exc
            finish(RunStatus.FAILED, error=repr(exc)[:2000])
            raise
        if lease.stop_reason is not None:  # the body noticed should_stop and returned
            self._stopped(lease, finish)
            raise LeaseStopped(lease.stop_reason)
        try:
            status, error = classify_result(result), None
        except InvalidInput as exc:
            status, error = RunStatus.FAILED, f"the task returned an invalid result: {exc}"
        finish(status, result=jsonable(result), error=error)
        return result

    def _stopped(self, lease: Lease, finish: Callable[..., None]) -> None:
        reason = lease.stop_reason or "stopped"
        logger.warning("run %s stopped: %s", lease.backend_id, reason)
        status = _STOP_STATUS.get(reason)
        if status is not None:
            finish(status, error=f"stopped by the lease: {reason}")

    def _ping_loop(self, store: SQLAlchemyStore, lease: Lease, done: threading.Event) -> None:
        period = float(self.app.conf.get("swh_scheduler_lease_ping") or DEFAULT_PING)
        grant = lease.grant
        started = grant.db_now
        allowed = expected = None
        if grant.task is not None:
            task_type = store.get_task_type(grant.task.type)
            if task_type is not None:
                allowed = max_allowed_duration(grant.task, task_type)
                expected = max_expected_duration(grant.task, task_type)
        db_now, local_at = grant.db_now, time.monotonic()
        warned = False
        while True:
            wait = period
            if allowed is not None:  # wake in time to enforce the bound
                elapsed = db_now - started + timedelta(seconds=time.monotonic() - local_at)
                wait = max(0.0, min(period, (allowed - elapsed).total_seconds()))
            if done.wait(wait):
                return
            try:
                reply = store.ping_lease(lease.backend_id, tag=lease.tag, progress=lease.progress)
            except SchedulerError as error:  # the database is away: the grace period covers us
                _ping_failed.log("run %s: ping failed: %s", lease.backend_id, error)
                continue
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


__all__ = ["Lease", "LeaseRefused", "LeaseStopped", "LeasedTask"]
