"""The Celery base class of visit loaders: each visit that ends sends a
``task-visit-status`` event (:mod:`..visits.events`), from which the
listener updates the origin's visit statistics; no run row is involved::

    @shared_task(base=VisitTask, name="swh.loader.git.tasks.UpdateGitRepository")
    def load_git(url: str, **extra) -> dict:
        ...
        return {"status": "eventful", "snapshot_id": snapshot.hex()}

The event is sent when the worker sends task events (``-E``), after the
body returned or raised (a raise is a failed visit); not for a retry (the
visit is not over).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from celery import Task, states

from ..recurrent.events import VISIT_EVENT, visit_event_fields
from .result_event import send_task_event, task_events_enabled


class VisitTask(Task):
    """Celery base class that reports each visit's end (module doc)."""

    def after_return(
        self,
        status: str,
        retval: Any,
        task_id: str,
        args: Any,
        kwargs: Any,
        einfo: Any,
    ) -> None:
        super().after_return(status, retval, task_id, args, kwargs, einfo)
        if status not in (states.SUCCESS, states.FAILURE) or self.request.id is None:
            return
        if not task_events_enabled(self):
            return
        fields = visit_event_fields(
            kwargs or {}, retval, failed=status == states.FAILURE, now=datetime.now(UTC)
        )
        if fields is not None:
            send_task_event(self, VISIT_EVENT, {"name": self.name, **fields})


__all__ = ["VisitTask"]
