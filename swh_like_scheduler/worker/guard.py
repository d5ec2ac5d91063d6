"""The start guard: the Celery base class every task type is built on.

Usage in a task module::

    @shared_task(base=SchedulerTask, bind=True, name="...")
    def crawl(self, url): ...

Before the body runs, each delivery of a run of ours (a message whose id is
a run id, see :func:`is_run_id`) asks the store, in one transaction on the
database's clock (:meth:`SchedulerStore.guard_start`), whether it is the
copy the run is waiting for: the run exists and is open, its task is neither
cancelled nor disabled, and no other copy of it has started. The same write
marks the run started (worker, start time) and makes this delivery the
task's owner until the run ends; the task so counts as running (its
condition watches the run's duration) whatever its type.

* **Refused** (a re-published or redelivered duplicate, a message revoked
  too late, a cancelled task, a run already ended): the body does not run;
  the delivery ends with :class:`StartRefused`, a :class:`celery.exceptions.Ignore`,
  so Celery acks the message and sends no succeeded/failed event, and the
  run's history says ``refused_copy``. The exception pickles (any pool).
* **The store cannot answer** (database down): the delivery is retried
  later with the same id (``task-retried``: the run stays open), never
  counted as a failure of the task; the wait grows from 1 s to 60 s.
* **Not a run of ours** (an id Celery made, e.g. ``apply_async`` by hand, or
  a direct call): the body runs unguarded; the scheduler knows nothing of it.

A body that calls ``self.retry()`` gives its ownership back first, so the
retried delivery (same id) is let through. An unexpected error of the guard
itself is an unknown outcome, not a failure of the task: the delivery is
retried as when the store cannot answer (and the traceback logged). The
result backend never decides the outcome of a body that ran
(:mod:`.outcome`). During an outage the guard's warnings come once per
minute with a count, not once per delivery.

The store comes from the Celery setting ``swh_scheduler_db_url``, else
``SWH_SCHEDULER_DB_URL``, else the scheduler's configuration file and its
default (the embedded SQLite file), read at the first guarded start and kept
per process (one connection pool per worker process, never shared across a
fork). With the Celery setting ``swh_scheduler_index_url`` (else
``SWH_SCHEDULER_INDEX_URL``), the runs a worker ends itself (lease
finishes, warm shutdowns) file their tasks in the scheduler's Redis index.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, cast

from celery.exceptions import Ignore, TaskPredicate

from ..config.settings import load_settings
from ..domain.exceptions import SchedulerError
from ..domain.lease import LeaseGrant, Refusal
from ..plumbing.quietlog import QuietLog
from ..recording import TaskTypeCache, outcome_applier
from ..store import SQLAlchemyStore
from ..store.interface import ApplyOutcome
from ..store.session import daemon_pool
from .fencing import RunTaken, local_clock
from .heartbeat import DEFAULT_EVERY, BodyOutcome, Heartbeat, heartbeat_for, heartbeat_of
from .outcome import BodyEnded, EndedBodies, KeptOutcomeBackend
from .result_event import ResultEventTask, main_pid

logger = logging.getLogger(__name__)
#: during a database outage every delivery fails its start the same way
_unreachable = QuietLog(logger, logging.WARNING)
_DOWN = "database"

#: the version of the UUIDs the scheduler gives its runs (name-based, MD5)
RUN_ID_VERSION = 3
#: longest wait before a delivery whose guard could not reach the store runs again
MAX_RETRY_WAIT = 60.0


def is_run_id(task_id: Any) -> bool:
    """Whether a Celery task id is one the scheduler gave a run
    (:func:`~swh_like_scheduler.domain.model.run_backend_id`); Celery's own ids are
    random (version 4) UUIDs."""
    try:
        return uuid.UUID(str(task_id)).version == RUN_ID_VERSION
    except ValueError:
        return False


class StartRefused(Ignore):
    """The start guard refused this delivery: the body did not run.

    ``reason`` is a :class:`~swh_like_scheduler.domain.lease.Refusal`
    value. Built from plain strings, so it survives pickling (a prefork
    child hands its exceptions to the parent pickled)."""

    def __init__(self, reason: str, backend_id: str | None = None) -> None:
        super().__init__(reason, backend_id)
        self.reason = reason
        self.backend_id = backend_id

    def __str__(self) -> str:
        return f"run {self.backend_id}: start refused ({self.reason})"


# -- per-process store ------------------------------------------------------------

_stores: dict[tuple[int, str, str | None], tuple[SQLAlchemyStore, ApplyOutcome]] = {}
_stores_lock = threading.Lock()


def store_for(url: str, *, index_url: str | None = None) -> tuple[SQLAlchemyStore, ApplyOutcome]:
    """The store on ``url`` of this process, with the listener's outcome
    rule (``apply``) for the runs a refusal ends; with ``index_url``, a store
    that keeps that Redis index in line with its writes."""
    key = (os.getpid(), url, index_url)  # never share an engine across a fork
    with _stores_lock:
        found = _stores.get(key)
        if found is None:
            # no ping before each checkout: one round trip per start; a
            # connection broken by a database restart fails one start, which
            # is delivered again (and the pool reconnects)
            store = SQLAlchemyStore.from_url(
                url, pool_pre_ping=False, role="worker", pool=daemon_pool("worker")
            )
            if index_url:
                from ..index import IndexedStore, RedisIndex

                # every method and attribute of the store, writes filed too
                store = cast(SQLAlchemyStore, IndexedStore(store, RedisIndex.from_url(index_url)))
            found = (store, outcome_applier(TaskTypeCache(store), random.Random()))
            _stores[key] = found
        return found


def identity(hostname: str | None) -> tuple[str, str]:
    """(worker name, node) from Celery's ``name@node`` hostname."""
    if hostname and "@" in hostname:
        name, node = hostname.split("@", 1)
        return name or "celery", node or socket.gethostname()
    return (hostname or f"celery-{os.getpid()}"), socket.gethostname()


@dataclass(frozen=True)
class Fence:
    """The fencing token of a start: ``token`` grows with each start the
    guard grants the task ``task_id``, and moves on at once when the run is
    taken from its copy. A side effect that keeps, per task, the largest
    token it has accepted, and refuses a smaller one, never takes a write
    from a copy the scheduler has taken away and started again (ZooKeeper's
    and Chubby's sequencers work so); :meth:`check` asks the database itself,
    before the side effect."""

    task_id: int
    token: int
    #: the question :meth:`check` asks (in the body of the run: its heartbeat)
    _checker: Callable[[Fence], None] | None = field(
        default=None, compare=False, hash=False, repr=False
    )

    def __str__(self) -> str:
        return f"task {self.task_id} start {self.token}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Fence, (self.task_id, self.token))  # the question stays in its process

    def check(self) -> None:
        """Raise :class:`~.fencing.RunTaken` unless this start still owns
        its run: :class:`~.fencing.LeaseLost` when its process could not
        renew the run within its self-fencing bound, :class:`RunTaken` when
        the run was taken (the task's token in the database is no longer
        this one). Call it right before a side effect the scheduler cannot
        undo: one read by primary key (when the database does not answer
        in time, the self-fencing bound decides). What it cannot close is
        the time between its answer and the side effect; a side effect that
        takes the token along and refuses a smaller one closes that too."""
        if self._checker is None:
            raise RuntimeError(
                f"{self}: a fencing token is checked in the body of its own run only"
            )
        self._checker(self)


class _Held(threading.local):
    start: tuple[SQLAlchemyStore, str, str] | None = None  # (store, backend id, tag)
    fence: Fence | None = None
    heartbeat: Heartbeat | None = None


class SchedulerTask(ResultEventTask):
    """Celery base class of every task type: the start guard (module doc),
    then the body, then the ``task-result`` event (:class:`ResultEventTask`)."""

    _held = _Held()
    #: per thread, the delivery whose body just ran (:mod:`.outcome`)
    _bodies = EndedBodies()
    #: what a refused delivery raises
    refused_error: ClassVar[type[StartRefused]] = StartRefused
    #: raise :class:`~.heartbeat.RunTaken` in the body when its run is taken
    #: from this copy (:mod:`.heartbeat`); false: let it run on (its end is
    #: recorded as superseded if another copy started)
    stop_when_taken: ClassVar[bool] = True

    @property
    def fence(self) -> Fence:
        """The fencing token of the run this thread executes (:class:`Fence`)."""
        fence = self._held.fence
        if fence is None:
            raise RuntimeError("no run of the scheduler is executing in this thread")
        return fence

    def heartbeat(self, store: SQLAlchemyStore, apply: ApplyOutcome) -> Heartbeat:
        """This process's heartbeat for ``store`` (:mod:`.heartbeat`): every
        ``swh_scheduler_lease_ping`` seconds (Celery setting, default 10);
        ends recorded by the worker after ``swh_scheduler_record_after``
        (default 3 beats), read when the process makes it."""
        made = heartbeat_of(store)
        if made is not None:  # (a read of Celery's settings costs microseconds)
            return made
        conf = self.app.conf
        every = float(conf.get("swh_scheduler_lease_ping") or DEFAULT_EVERY)
        after = conf.get("swh_scheduler_record_after")
        return heartbeat_for(
            store, apply, every=every, record_after=float(after) if after else None
        )

    def scheduler_store(self) -> tuple[SQLAlchemyStore, ApplyOutcome]:
        """This process's store and outcome rule (module doc: where the URL comes from)."""
        conf = self.app.conf
        url = conf.get("swh_scheduler_db_url") or os.environ.get("SWH_SCHEDULER_DB_URL")
        index = conf.get("swh_scheduler_index_url") or os.environ.get("SWH_SCHEDULER_INDEX_URL")
        return store_for(str(url or load_settings().db_url), index_url=index or None)

    def on_start_refused(self, grant: LeaseGrant) -> None:
        """Called when the guard refuses a delivery, before :class:`StartRefused`."""
        if grant.reason is Refusal.UNKNOWN_RUN:
            store, _ = self.scheduler_store()
            logger.warning(
                "run %s is not in the scheduler database this worker uses (%s); not running "
                "it. If the scheduler uses another database, set the Celery setting "
                "swh_scheduler_db_url or SWH_SCHEDULER_DB_URL for the worker",
                self.request.id,
                store.engine.url.render_as_string(hide_password=True),
            )
            return
        logger.info(
            "run %s: start refused (%s); the body does not run", self.request.id, grant.reason
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        backend_id = self.request.id
        if backend_id is None or self.request.called_directly or not is_run_id(backend_id):
            return super().__call__(*args, **kwargs)
        asked = local_clock()  # the bound counts from before the database stamped the start
        store, apply, grant, tag = self.guard_start(backend_id, lease=False)
        beat = self.heartbeat(store, apply)
        held = self._held
        fence = fence_of(grant)
        if fence is not None:
            fence = replace(fence, _checker=lambda f: beat.check(backend_id, f.task_id, f.token))
        held.start, held.fence, held.heartbeat = (store, backend_id, tag), fence, beat
        self._bodies.ended = None
        outcome = None
        try:
            # (raises RunTaken when the run was taken before its start was answered)
            beat.hold(backend_id, tag, stop_when_taken=self.stop_when_taken, since=asked)
            value = super().__call__(*args, **kwargs)
            outcome = BodyOutcome(value)
            return value
        except RunTaken as exc:
            outcome = BodyOutcome(exception=exc)
            raise
        except Exception as exc:
            lost = beat.verdict(backend_id) if held.start is not None else None
            if lost is None or isinstance(exc, TaskPredicate):  # (retry, ignore, reject)
                outcome = BodyOutcome(exception=exc)
                raise
            # a copy that lost its run: its failure is no outcome either
            stop = lost(f"run {backend_id}: this copy no longer owns its run ({exc!r})")
            outcome = BodyOutcome(exception=stop)
            raise stop from exc
        except BaseException as exc:
            outcome = BodyOutcome(exception=exc)
            raise
        finally:
            beat.ended(backend_id, outcome)  # (a retry released it: nothing then)
            if held.start is not None:  # the body ran, and gave no run back
                self._bodies.ended = BodyEnded(store, apply, backend_id, tag)
            held.start = held.fence = held.heartbeat = None

    def body_returned(self) -> None:
        """Before a guarded body's success is reported: raise
        :class:`~.fencing.RunTaken` (or :class:`~.fencing.LeaseLost`) when
        this copy no longer owns its run (its heartbeat knows, or, after a
        stall, the database says): the run's end is then no outcome of the
        task (:meth:`~.ownership.Ownership.confirm`)."""
        held = self._held
        if held.start is not None and held.heartbeat is not None:
            held.heartbeat.confirm(held.start[1])

    @property
    def backend(self) -> Any:
        """Celery's result backend; for a run of ours, wrapped so that its
        failures never decide the run's outcome (:mod:`.outcome`)."""
        inner = self._backend if self._backend is not None else self.app.backend
        request = self.request
        if request.id is None or request.called_directly or not is_run_id(request.id):
            return inner
        return KeptOutcomeBackend(inner, self._bodies)

    @backend.setter
    def backend(self, value: Any) -> None:
        self._backend = value

    def guard_start(
        self, backend_id: str, *, lease: bool
    ) -> tuple[SQLAlchemyStore, ApplyOutcome, LeaseGrant, str]:
        """Take the run for this delivery (a lease when ``lease``) or raise:
        :attr:`refused_error`, or Celery's ``Retry`` when the store cannot
        answer. Returns the store, its outcome rule, the grant and this
        delivery's tag."""
        tag = uuid.uuid4().hex
        name, node = identity(self.request.hostname)
        try:
            store, apply = self.scheduler_store()
            take = store.acquire_lease if lease else store.guard_start
            grant = take(backend_id, node=node, name=name, tag=tag, apply=apply, pid=main_pid(self))
        except SchedulerError as error:
            raise self._retry_start(backend_id, error) from error
        except Exception as error:  # a bug outside the body: outcome unknown, not failed
            logger.exception("run %s: the start guard failed", backend_id)
            raise self._retry_start(backend_id, error) from error
        _unreachable.ok(_DOWN)
        if not grant.granted:
            self.on_start_refused(grant)
            raise self.refused_error(str(grant.reason), backend_id)
        return store, apply, grant, tag

    def _retry_start(self, backend_id: str, error: Exception) -> BaseException:
        retries = int(self.request.retries or 0)
        wait = min(MAX_RETRY_WAIT, 2.0 ** min(retries, 6))
        _unreachable.log(
            "run %s: the start guard could not reach the scheduler database (%s); "
            "delivering it again in %.0f s",
            backend_id,
            error,
            wait,
            key=_DOWN,
        )
        # a retry is a new delivery of the same id, not a failure of the task
        return self.retry(exc=error, countdown=wait, max_retries=sys.maxsize)

    def retry(self, *args: Any, **kwargs: Any) -> Any:
        """Celery's ``retry``, after giving the run back (module doc)."""
        held = self._held.start
        if held is not None:
            store, backend_id, tag = held
            self._held.start = None
            if self._held.heartbeat is not None:
                self._held.heartbeat.release(backend_id)
            try:
                store.release_start(backend_id, tag=tag)
            except SchedulerError:
                logger.exception("run %s: could not give the run back for its retry", backend_id)
        return super().retry(*args, **kwargs)


def fence_of(grant: LeaseGrant) -> Fence | None:
    """The fencing token a grant carries (``None``: refused)."""
    task_id = grant.task_id
    if task_id is None and grant.task is not None:
        task_id = grant.task.id
    if grant.fence is None or task_id is None:
        return None
    return Fence(task_id, grant.fence)


__all__ = [
    "Fence",
    "SchedulerTask",
    "StartRefused",
    "fence_of",
    "identity",
    "is_run_id",
    "store_for",
]
