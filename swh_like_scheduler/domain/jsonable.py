"""Domain objects as JSON values: one layout for the command line's
``--json`` and the HTTP API (instants in ISO 8601, durations in seconds)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from .model import Task, TaskRun, TaskType


def plain(value: Any) -> Any:
    """``value`` with every instant, duration, enum and record turned into
    JSON values (lists for tuples)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "to_dict"):
        return plain(value.to_dict())
    return value


#: what a reader sees of a secret
HIDDEN = "***"


def hidden_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the values of its ``headers`` (an http callback's
    ``Authorization``...) hidden: they are written, kept for the worker,
    and never read back."""
    headers = kwargs.get("headers")
    if not isinstance(headers, Mapping) or not headers:
        return dict(kwargs)
    return {**kwargs, "headers": dict.fromkeys(headers, HIDDEN)}


def without_secrets(task: Task) -> Task:
    """``task`` as readers see it (:func:`hidden_kwargs`)."""
    if not isinstance(task.kwargs.get("headers"), Mapping):
        return task
    return dataclasses.replace(task, kwargs=hidden_kwargs(task.kwargs))


def task_json(task: Task) -> dict[str, Any]:
    """A task's fields (not its computed digests, nor its secrets) and its policy."""
    data = dataclasses.asdict(task)
    del data["_arguments_hash"], data["_arguments_size"]
    data["kwargs"] = hidden_kwargs(task.kwargs)
    data["policy"] = task.policy.value
    data["blackout_periods"] = [b.to_json() for b in task.blackout_periods]
    return data


def run_json(run: TaskRun) -> dict[str, Any]:
    return dataclasses.asdict(run)


def task_type_json(task_type: TaskType) -> dict[str, Any]:
    """A task type's fields and the queue its tasks go to."""
    data = dataclasses.asdict(task_type)
    data["queue"] = task_type.effective_queue
    return data
