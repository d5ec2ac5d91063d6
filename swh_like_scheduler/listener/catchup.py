"""Catch-up: record runs whose events were missed, from Celery's result backend.

On Redis, events sent while no listener is connected are lost (fanout). When
the Celery app has a result backend, a worker also stores each task's final
state there under the task id, which is our run's ``backend_id``. For every
run still open (``scheduled`` or ``started``) dispatched before
``older_than``, :func:`catch_up` reads that state and, when final, records
it exactly as the matching event would have been:

=============  =========================================================
backend state  recorded as
=============  =========================================================
``SUCCESS``    end with ``classify_result(result)``, at ``date_done``
``FAILURE``    end ``failed``, error = the exception, at ``date_done``
``REVOKED``    end ``cancelled``, at ``date_done``
others         nothing (``PENDING``: unknown or not finished; ``STARTED``,
               ``RETRY``: still running)
=============  =========================================================

The start is unknown from the backend (unless a start event was recorded),
so such a run adds no sample to the average duration. The same guards as for
events apply: a run that ended meanwhile is left as it is. Without a result
backend nothing is done (the report says so).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from celery import Celery

from ..domain.model import RunStatus, TaskRun, TaskStatus
from ..store import SchedulerStore
from ..store.interface import TaskFilter
from .actions import Action
from .events import EventKind, RunEvent, error_text, jsonable, status_of_result
from .handler import EventHandler

logger = logging.getLogger(__name__)

#: Task statuses that may have an open run: scheduled (dispatched), and
#: disabled or cancelled while a run was under way (it is left to finish).
_MAY_HAVE_OPEN_RUN = (TaskStatus.SCHEDULED, TaskStatus.DISABLED, TaskStatus.CANCELLED)


@dataclass(frozen=True)
class CatchUpReport:
    """What :func:`catch_up` did: open runs ``checked``, ``recorded`` from the
    backend, ``unfinished`` (no final state there yet); ``backend`` is False
    when the app has no result backend (nothing could be checked)."""

    checked: int = 0
    recorded: int = 0
    unfinished: int = 0
    backend: bool = True


def open_runs(
    store: SchedulerStore, *, scheduled_before: datetime, page: int = 500
) -> Iterator[TaskRun]:
    """Open runs dispatched before ``scheduled_before``.

    Built on the store's public methods only: tasks that may have an open run
    are paged by id and their latest run is read (one query per task). A
    store method listing open runs directly would make this one query per
    page; see the listener's notes.
    """
    criteria = TaskFilter(status=list(_MAY_HAVE_OPEN_RUN))
    after = 0
    while True:
        tasks = store.search_tasks(criteria, after_id=after, limit=page)
        if not tasks:
            return
        for task in tasks:
            assert task.id is not None
            latest = store.get_task_runs(task.id, limit=1)
            if latest and latest[0].status.is_open and latest[0].scheduled < scheduled_before:
                yield latest[0]
        last = tasks[-1].id
        assert last is not None
        after = last


def _backend_enabled(app: Celery) -> bool:
    return app.backend.as_uri() != "disabled://"


def _aware(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def backend_event(app: Celery, run: TaskRun) -> RunEvent | None:
    """The end event the result backend's state of ``run`` stands for, or None."""
    result = app.AsyncResult(run.backend_id)
    state = result.state
    if state not in ("SUCCESS", "FAILURE", "REVOKED"):
        return None
    ended = _aware(result.date_done)
    if ended is None:
        return None
    value = result.result
    if state == "SUCCESS":
        status, error = status_of_result(value)
        return RunEvent(
            EventKind.END,
            run.backend_id,
            ended,
            "result-backend",
            status=status,
            result=jsonable(value),
            error=error,
        )
    if state == "FAILURE":
        return RunEvent(
            EventKind.END,
            run.backend_id,
            ended,
            "result-backend",
            status=RunStatus.FAILED,
            error=error_text(value),
        )
    return RunEvent(
        EventKind.END,
        run.backend_id,
        ended,
        "result-backend",
        status=RunStatus.CANCELLED,
        error="revoked",
    )


def catch_up(
    store: SchedulerStore,
    app: Celery,
    *,
    older_than: datetime,
    handler: EventHandler | None = None,
    rng: Any = None,
    limit: int | None = None,
) -> CatchUpReport:
    """Record, from ``app``'s result backend, the open runs dispatched before
    ``older_than`` that have in fact ended (see the module doc).

    ``older_than`` leaves recent runs to their events (e.g. now - 1 min).
    Pass a ``handler`` to share its caches, else ``rng`` (retry jitter) to
    build one. ``limit`` bounds the number of runs checked in one call.
    """
    if not _backend_enabled(app):
        return CatchUpReport(backend=False)
    if handler is None:
        if rng is None:
            raise ValueError("catch_up needs a handler or an rng")
        handler = EventHandler(store, rng=rng)
    checked = recorded = unfinished = 0
    for run in open_runs(store, scheduled_before=older_than):
        if limit is not None and checked >= limit:
            break
        checked += 1
        event = backend_event(app, run)
        if event is None:
            unfinished += 1
            continue
        if handler.apply(event).action is Action.ENDED:
            recorded += 1
            logger.info("run %s recorded from the result backend: %s", run.backend_id, event.status)
    return CatchUpReport(checked=checked, recorded=recorded, unfinished=unfinished)
