"""The outcome of a body is never decided by Celery's result backend.

After a task's body returns, Celery stores the result in the result backend
and only then reports success: when that store fails (the backend's server
is down, as happens when one Redis is broker and backend), Celery turns the
run into a failure (``task-failed``, ``ConnectionError``) although the body
succeeded; a type with retries then runs the body again. When the body
raised, a failing store replaces the body's exception by the backend's.

:class:`KeptOutcomeBackend` wraps the result backend of our task types. For a
run of ours (a guarded delivery whose body ran), a failure to store its
final state:

* records the body's real outcome in the scheduler database itself, as the
  lease's final write does (:meth:`SchedulerStore.finish_lease`: the run
  ends with the status the body's value or exception stands for, the task's
  next schedule in the same transaction) — no event and no backend needed;
* is then swallowed, so Celery goes on as if the result had been stored and
  sends the ``task-succeeded`` / ``task-failed`` event that matches the body
  (kept in the worker while the broker is away); the listener finds the run
  already ended and leaves it.

In normal operation this costs nothing: the database is written only when
the backend failed. If the database cannot be reached either, the event
remains (the failure is logged, at most once per minute with a count). A
failure to store a ``RETRY`` or ``STARTED`` state is only informative and is
swallowed too. Deliveries that are not runs of ours keep Celery's behaviour.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from ..domain.exceptions import SchedulerError
from ..domain.model import RunStatus
from ..listener.events import error_text, jsonable, status_of_result
from ..plumbing.quietlog import QuietLog
from ..store import SQLAlchemyStore
from ..store.interface import ApplyOutcome
from .fencing import RunTaken

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BodyEnded:
    """A guarded delivery whose body ran: what its final write needs."""

    store: SQLAlchemyStore
    apply: ApplyOutcome
    backend_id: str
    tag: str


class EndedBodies(threading.local):
    """Per thread: the delivery whose body has just run, until Celery has
    stored (or failed to store) its final state."""

    ended: BodyEnded | None = None

    def take(self, task_id: str) -> BodyEnded | None:
        ended, self.ended = self.ended, None
        return ended if ended is not None and ended.backend_id == task_id else None


_failed_store = QuietLog(logger, logging.WARNING)
_failed_write = QuietLog(logger, logging.ERROR)


def record_aside(ended: BodyEnded, status: RunStatus, *, result: Any, error: str | None) -> bool:
    """The final write of a run whose result could not be stored: the run
    ends ``status`` in the scheduler database (once: a run already ended is
    left as it is). False, logged, when the database cannot be reached."""
    try:
        ended.store.finish_lease(
            ended.backend_id,
            tag=ended.tag,
            status=status,
            result=result,
            error=error,
            apply=ended.apply,
        )
    except SchedulerError as exc:
        _failed_write.log(
            "run %s: neither the result backend nor the scheduler database took its "
            "outcome (%s): its %s event remains",
            ended.backend_id,
            exc,
            status,
            key="database",
        )
        return False
    return True


class KeptOutcomeBackend:
    """A Celery result backend whose failures never decide a run's outcome
    (module doc). Every other attribute is the wrapped backend's."""

    __slots__ = ("_bodies", "_inner")

    def __init__(self, inner: Any, bodies: EndedBodies) -> None:
        self._inner = inner
        self._bodies = bodies

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _failed(self, task_id: str, error: Exception, state: str) -> None:
        _failed_store.log(
            "run %s: the result backend could not store its %s state (%s: %s); "
            "the outcome is kept by the scheduler",
            task_id,
            state,
            type(error).__name__,
            error,
            key="backend",
        )

    def mark_as_done(self, task_id: str, result: Any, *args: Any, **kwargs: Any) -> Any:
        ended = self._bodies.take(task_id)
        try:
            return self._inner.mark_as_done(task_id, result, *args, **kwargs)
        except Exception as error:
            self._failed(task_id, error, "SUCCESS")
            if ended is not None:
                status, invalid = status_of_result(result)
                record_aside(ended, status, result=jsonable(result), error=invalid)
            return None

    def mark_as_failure(self, task_id: str, exc: Any, *args: Any, **kwargs: Any) -> Any:
        ended = self._bodies.take(task_id)
        try:
            return self._inner.mark_as_failure(task_id, exc, *args, **kwargs)
        except Exception as error:
            self._failed(task_id, error, "FAILURE")
            # a copy that lost its run has no outcome to write (the listener
            # or the monitor ends the run): never a failure of the task
            if ended is not None and not isinstance(exc, RunTaken):
                record_aside(ended, RunStatus.FAILED, result=None, error=error_text(repr(exc)))
            return None

    def mark_as_retry(self, task_id: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._inner.mark_as_retry(task_id, *args, **kwargs)
        except Exception as error:
            self._failed(task_id, error, "RETRY")
            return None

    def mark_as_started(self, task_id: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._inner.mark_as_started(task_id, *args, **kwargs)
        except Exception as error:
            self._failed(task_id, error, "STARTED")
            return None


__all__ = ["BodyEnded", "EndedBodies", "KeptOutcomeBackend", "record_aside"]
