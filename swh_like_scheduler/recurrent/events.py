"""Visit statuses as Celery events: what a visit worker sends when a visit
ends (:class:`~swh_like_scheduler.worker.visit.VisitTask`), and how the
listener reads it back into a :class:`~.feedback.VisitStatusMessage`.

The event, ``task-visit-status`` (in Celery's task group: sent when the
worker sends task events, batched with them), carries ``origin`` (the
visit's ``url`` argument), ``name`` (the Celery task, whose task type
``load-<visit type>`` names the visit type), ``status`` (``full``,
``not_found`` or ``failed``), ``snapshot`` (hex, when the loader gave one),
``eventful`` (the loader's verdict) and ``date`` (when the visit ended).

A loader returns what Software Heritage's loaders return: ``{"status":
"eventful" | "uneventful" | "not_found" | "failed", "snapshot_id": hex}``.
Eventful and uneventful are full visits with that verdict; a result with a
``snapshot_id`` and no ``status`` is a full visit whose verdict the
scheduler finds by comparing snapshots; anything else, or an exception, is
a failed visit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..domain.exceptions import InvalidInput
from ..visits.feedback import VisitStatusMessage
from ..visits.intake import instant
from ..visits.model import VISIT_TASK_PREFIX, snapshot_id

if TYPE_CHECKING:  # the store is a room above: a type only
    from ..store import SchedulerStore

logger = logging.getLogger(__name__)

VISIT_EVENT = "task-visit-status"
#: a loader's result status: the visit's status and the loader's verdict
LOADER_STATUSES: Mapping[str, tuple[str, bool | None]] = {
    "eventful": ("full", True),
    "uneventful": ("full", False),
    "not_found": ("not_found", None),
    "failed": ("failed", None),
    # no verdict, a snapshot: the scheduler compares it with the last one
    "snapshot": ("full", None),
}


def visit_event_fields(
    kwargs: Mapping[str, Any], result: Any, *, failed: bool, now: datetime
) -> dict[str, Any] | None:
    """The fields of the event of a visit that ended (``None``: the call
    was no visit, it had no ``url``)."""
    url = kwargs.get("url")
    if not isinstance(url, str):
        return None
    status, eventful, snapshot = "failed", None, None
    if not failed and isinstance(result, Mapping):
        given = result.get("status")
        if given is None and result.get("snapshot_id"):  # the scheduler compares
            given = "snapshot"
        status, eventful = LOADER_STATUSES.get(str(given), ("failed", None))
        try:
            snapshot = snapshot_id("snapshot_id", result.get("snapshot_id"))
        except InvalidInput:
            snapshot = None
    return {
        "origin": url,
        "status": status,
        "snapshot": snapshot,
        "eventful": eventful,
        "date": now.isoformat(),
    }


def status_of_event(event: Mapping[str, Any], visit_type: str) -> VisitStatusMessage:
    """The visit status an event carries (:class:`InvalidInput` naming the
    field it refuses)."""
    return VisitStatusMessage(
        origin=event.get("origin"),  # type: ignore[arg-type]
        visit_type=visit_type,
        date=instant("date", event.get("date"), required=True),  # type: ignore[arg-type]
        status=event.get("status"),  # type: ignore[arg-type]
        snapshot=event.get("snapshot"),
        eventful=event.get("eventful"),
    )


class VisitTypes:
    """The visit type of a Celery task name (the task type ``load-<visit
    type>`` whose backend it is), read from the store again after ``ttl``
    seconds. Two visit types on one task name: the first by name."""

    def __init__(
        self,
        store: SchedulerStore,
        *,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store, self._ttl, self._clock = store, ttl, clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._by_task: dict[str, str] = {}

    def of(self, task_name: str) -> str | None:
        now = self._clock()
        with self._lock:
            fresh = self._read_at is not None and now - self._read_at < self._ttl
            if fresh:
                return self._by_task.get(task_name)
        found: dict[str, str] = {}
        for task_type in self._store.get_task_types():
            if task_type.type.startswith(VISIT_TASK_PREFIX):
                visit = task_type.type.removeprefix(VISIT_TASK_PREFIX)
                found.setdefault(task_type.backend_name, visit)
        with self._lock:
            self._by_task, self._read_at = found, now
        return found.get(task_name)


class VisitFeed:
    """The listener's half: visit events applied to the statistics."""

    def __init__(self, store: SchedulerStore, visit_types: VisitTypes | None = None) -> None:
        self._store = store
        self._types = visit_types or VisitTypes(store)

    def read(self, events: list[Mapping[str, Any]]) -> tuple[list[VisitStatusMessage], int]:
        """The statuses of ``events``, and how many were not visits of ours
        (a task name of no ``load-`` type) or unreadable (logged)."""
        statuses: list[VisitStatusMessage] = []
        skipped = 0
        for event in events:
            name = event.get("name")
            visit_type = self._types.of(name) if isinstance(name, str) else None
            if visit_type is None:
                skipped += 1
                continue
            try:
                statuses.append(status_of_event(event, visit_type))
            except InvalidInput as refused:
                logger.warning("visit event of %s skipped: %s", event.get("uuid"), refused)
                skipped += 1
        return statuses, skipped

    def apply(self, events: list[Mapping[str, Any]]) -> tuple[int, int]:
        """Apply ``events``: ``(statuses that moved a row, events that did
        not)``. A store failure propagates (the batch comes again)."""
        statuses, skipped = self.read(events)
        if not statuses:
            return 0, skipped
        changed, ignored = self._store.record_visit_statuses(statuses)
        return changed, ignored + skipped
