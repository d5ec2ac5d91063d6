"""Task runs and claimed tasks: what the store records of each attempt and
what the runner needs to publish one (:mod:`.model` re-exports them).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .enums import RunStatus, check_aware
from .exceptions import InvalidInput


@dataclass(frozen=True)
class TaskRun:
    """One attempt at running a task, dispatched as one Celery message."""

    task_id: int
    backend_id: str
    slot: datetime
    scheduled: datetime
    status: RunStatus = RunStatus.SCHEDULED
    id: int | None = None
    started: datetime | None = None
    ended: datetime | None = None
    worker: str | None = None
    error: str | None = None
    progress: float | None = None
    result: Any = None
    history: tuple[Mapping[str, Any], ...] = ()
    #: the fencing token of the start that took the run (the task's count of
    #: granted starts at that moment); ``None`` until a start guard took it
    fence: int | None = None

    @classmethod
    def stored(cls, values: Mapping[str, Any]) -> TaskRun:
        """A run read back from the store (every field, given by name in
        ``values``; ``history`` a sequence), built without checking again
        what was checked when it was written: the listener reads two runs
        back per outcome."""
        run = object.__new__(cls)
        run.__dict__.update(values)  # (frozen: no __setattr__ per field)
        put = object.__setattr__
        put(run, "status", RunStatus(run.status))
        put(run, "history", tuple(run.history or ()))
        return run

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunStatus(self.status))
        object.__setattr__(self, "history", tuple(self.history))
        for name in ("slot", "scheduled", "started", "ended"):
            check_aware(name, getattr(self, name))
        if self.progress is not None and not 0.0 <= self.progress <= 1.0:
            raise InvalidInput("progress", f"{self.progress} is not between 0 and 1")


@dataclass(frozen=True, slots=True)
class Claimed:
    """A task claimed for dispatch: what its Celery message needs.

    Its run exists in the store (status ``scheduled``) under ``backend_id``.
    Deliberately light (no validation): the runner builds thousands a second.
    ``arguments`` is the task's ``{"args": [...], "kwargs": {...}}``, or its
    JSON text as the store read it: decoding is then left to whoever builds
    the message (the runner's publishing thread, while the next claim runs).
    """

    task_id: int
    slot: datetime
    deadline: datetime
    backend_id: str
    arguments: Mapping[str, Any] | str
    dont_run_on_nodes: tuple[str, ...] = ()
    #: the dispatch batch of its run: mark it published
    #: (:meth:`~swh_like_scheduler.store.SchedulerStore.mark_published`) once
    #: the message is on the broker; ``None`` when the store keeps none
    batch: int | None = None

    def call_arguments(self) -> tuple[tuple[Any, ...], Mapping[str, Any]]:
        """``(args, kwargs)`` of the task's call (decoded once per call)."""
        arguments = self.arguments
        if isinstance(arguments, str):
            arguments = decode_json(arguments)
        return tuple(arguments.get("args", ())), arguments.get("kwargs", {})

    @property
    def args(self) -> tuple[Any, ...]:
        return self.call_arguments()[0]

    @property
    def kwargs(self) -> Mapping[str, Any]:
        return self.call_arguments()[1]


_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def decode_json(text: str) -> Any:
    """``json.loads(text)`` for a text without surrounding blanks (as
    PostgreSQL writes JSON), at a quarter of the cost: ``json.loads`` spends
    most of its time on small texts looking for blanks with regular
    expressions. Anything else goes through ``json.loads`` (and its errors)."""
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        end = -1
    return value if end == len(text) else json.loads(text)


#: Namespace of :func:`run_backend_id` (the store computes the same id in SQL).
RUN_NAMESPACE = uuid.UUID("6f1f7d2e-8a55-4c1e-9a43-2f3f0c9b6d11")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def run_backend_id(task_id: int, slot: datetime, namespace: uuid.UUID = RUN_NAMESPACE) -> str:
    """The Celery task id of a task's run for one slot.

    Derived from the task id and the slot only, so re-publishing the run's
    message reuses the same id and a duplicate delivery can be recognised.
    It is the name-based (MD5, version 3) UUID of ``"<task id>@<slot in
    microseconds since the epoch>"`` in ``namespace``: integers only, so
    that the PostgreSQL store can compute the very same id inside its claim
    statement. A store gives its installation's namespace (derived from the
    id stored in its database), so that two installations, whose task ids
    and slots may well coincide, never give two runs one id;
    :data:`RUN_NAMESPACE` is the default of a caller without a store.
    """
    micros = (slot - _EPOCH) // _MICROSECOND
    return str(uuid.uuid3(namespace, f"{task_id}@{micros}"))
