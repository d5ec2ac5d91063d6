"""Editing tasks and task types in place: which fields an edit may change,
when, and how raw input (command-line options, a PATCH body) becomes changes.

The tables here are the one place that says what is editable: a new field
becomes editable by adding one line to :data:`TASK_EDITABLE` or
:data:`TASK_TYPE_EDITABLE` (and, if it is not a duration, its parser in
:func:`_task_value` / :func:`_type_value`). The store applies the changes
(:meth:`~swh_like_scheduler.store.TaskStore.edit_task`,
:meth:`~swh_like_scheduler.store.TaskStore.update_task_type`) and the policy
engine computes the new times (:func:`.policy.edit.edited_task`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from enum import StrEnum
from typing import Any

from ..domain import validation
from ..domain.exceptions import InvalidInput
from ..domain.model import (
    POSITIVE_TASK_DURATIONS,
    POSITIVE_TYPE_DURATIONS,
    TASK_TYPE_DURATIONS,
    BlackoutPeriod,
    CatchUp,
    Priority,
    ScheduleKind,
    Task,
    TaskType,
)
from .builders import boolean_value, json_value


class Applies(StrEnum):
    """When a change of a task's field takes effect if a run holds the task."""

    #: stored at once; the open run goes on as it was dispatched, and the
    #: times computed when its outcome is recorded use the new value
    NEXT_RUN = "next run"
    #: refused while a run holds the task: the open run was dispatched with
    #: the old value (its message, its time limit) or its outcome would mean
    #: something else under the new one
    IDLE = "idle"


#: the task fields an edit may change, and what happens while a run holds
#: the task (status ``scheduled``, or a lease owner)
TASK_EDITABLE: Mapping[str, Applies] = {
    "schedule_kind": Applies.IDLE,  # a good one-shot run completes its task
    "period": Applies.NEXT_RUN,
    "cooldown": Applies.NEXT_RUN,
    "cron": Applies.NEXT_RUN,
    "cron_max_duration": Applies.NEXT_RUN,
    "current_interval": Applies.NEXT_RUN,
    "max_delay": Applies.IDLE,  # the open run's promise is its deadline
    "priority": Applies.NEXT_RUN,
    "args": Applies.IDLE,  # in the open run's message
    "kwargs": Applies.IDLE,
    "tz": Applies.NEXT_RUN,
    "blackout_periods": Applies.NEXT_RUN,
    "dont_run_on_nodes": Applies.IDLE,  # in the open run's message
    "max_expected_duration": Applies.NEXT_RUN,
    "max_allowed_duration": Applies.IDLE,  # the open run's time limit
    "expected_duration": Applies.NEXT_RUN,
    "failure_count": Applies.NEXT_RUN,  # only to 0: a fresh retry budget
    "catch_up": Applies.NEXT_RUN,  # ``None``: the type's
    "catch_up_grace": Applies.NEXT_RUN,
}

#: input names (command-line options, PATCH bodies) that differ from the field's
TASK_INPUT_NAMES: Mapping[str, str] = {
    "kind": "schedule_kind",
    "interval": "current_interval",
    "reset_retries": "failure_count",
}

#: the task type fields an edit may change (not ``type``, its name, nor
#: ``paused_at``: ``pause`` and ``resume`` change it)
TASK_TYPE_EDITABLE: tuple[str, ...] = (
    "description",
    "backend_name",
    "queue",
    "default_interval",
    "min_interval",
    "max_interval",
    "backoff_factor",
    "max_queue_length",
    "num_retries",
    "retry_delay",
    "retry_growth",
    "retry_cap",
    "retry_jitter",
    "max_expected_duration",
    "max_allowed_duration",
    "uses_lease",
    "catch_up",
    "catch_up_grace",
)

#: task type fields refused while runs of the type are open (dispatched or
#: running): their messages carry the Celery task name and sit in the queue
TASK_TYPE_IDLE = frozenset({"backend_name", "queue"})

#: the words that unset a nullable field
UNSET_WORDS = frozenset({"none", "null"})

_TASK_DURATIONS = frozenset(
    f.name for f in fields(Task) if f.type == "timedelta | None" and f.name in TASK_EDITABLE
)
_TASK_NULLABLE = frozenset(f.name for f in fields(Task) if f.default is None)
_TYPE_NULLABLE = frozenset(f.name for f in fields(TaskType) if f.default is None)


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in UNSET_WORDS)


def task_field(name: str) -> str:
    """The task field an input name stands for; InvalidInput if not editable."""
    field = TASK_INPUT_NAMES.get(name, name)
    if field not in TASK_EDITABLE:
        known = sorted({*TASK_EDITABLE, *TASK_INPUT_NAMES} - set(TASK_INPUT_NAMES.values()))
        raise InvalidInput(name, f"cannot be edited (editable: {', '.join(known)})")
    return field


def task_changes(values: Mapping[str, Any]) -> dict[str, Any]:
    """The task field changes that raw ``values`` (input name → text, number,
    JSON value or ``None``) ask for. ``None``, ``"none"`` or ``"null"``
    unsets a nullable field; InvalidInput names the first bad one."""
    changes: dict[str, Any] = {}
    for name, raw in values.items():
        field = task_field(name)
        if field in changes:
            raise InvalidInput(name, f"is given twice (as {field})")
        changes[field] = _task_value(name, field, raw)
    return changes


def _task_value(name: str, field: str, raw: Any) -> Any:
    if field == "failure_count":
        if raw is True or (not isinstance(raw, bool) and boolean_value(name, raw)):
            return 0
        raise InvalidInput(name, "can only be true: the retry budget starts afresh")
    if _unset(raw):
        if field in ("blackout_periods", "dont_run_on_nodes"):
            return ()
        if field not in _TASK_NULLABLE:
            raise InvalidInput(name, "cannot be unset")
        return None
    if field in _TASK_DURATIONS:
        return validation.parse_duration(name, raw, positive=field in POSITIVE_TASK_DURATIONS)
    if field == "schedule_kind":
        return _choice(name, raw, ScheduleKind)
    if field == "priority":
        return _choice(name, raw, Priority)
    if field == "catch_up":
        return _choice(name, raw, CatchUp)
    if field == "cron":
        return validation.cron_expression(name, str(raw))
    if field == "tz":
        text = str(raw).strip()
        validation.zone(name, text)
        return text
    if field == "args":
        return tuple(json_value(name, raw, list))
    if field == "kwargs":
        return json_value(name, raw, dict)
    if field == "blackout_periods":
        return tuple(BlackoutPeriod.parse(w) for w in json_value(name, raw, list))
    assert field == "dont_run_on_nodes", field
    if isinstance(raw, str) and not raw.lstrip().startswith("["):
        raw = [n.strip() for n in raw.split(",") if n.strip()]
    return tuple(str(n) for n in json_value(name, raw, list))


def _choice(name: str, raw: Any, kind: type[StrEnum]) -> Any:
    try:
        return kind(str(raw).strip())
    except ValueError:
        choices = ", ".join(k.value for k in kind)
        raise InvalidInput(name, f"{raw!r} is not one of {choices}") from None


def task_type_changes(values: Mapping[str, Any]) -> dict[str, Any]:
    """The task type field changes that raw ``values`` ask for (unset as in
    :func:`task_changes`)."""
    changes: dict[str, Any] = {}
    for name, raw in values.items():
        if name not in TASK_TYPE_EDITABLE:
            raise InvalidInput(
                name, f"cannot be edited (editable: {', '.join(sorted(TASK_TYPE_EDITABLE))})"
            )
        changes[name] = _type_value(name, raw)
    return changes


def _type_value(name: str, raw: Any) -> Any:
    if _unset(raw):
        if name not in _TYPE_NULLABLE:
            raise InvalidInput(name, "cannot be unset")
        return None
    if name in TASK_TYPE_DURATIONS:
        return validation.parse_duration(name, raw, positive=name in POSITIVE_TYPE_DURATIONS)
    if name in ("max_queue_length", "num_retries"):
        return validation.non_negative_int(name, raw)
    if name == "backoff_factor":
        return validation.positive_float(name, raw, minimum=1.0)
    if name == "retry_growth":
        return validation.positive_float(name, raw)
    if name == "uses_lease":
        return boolean_value(name, raw)
    if name == "catch_up":
        return _choice(name, raw, CatchUp)
    if not isinstance(raw, str):
        raise InvalidInput(name, f"must be text, got {type(raw).__name__}")
    return raw


def nullable_task_inputs() -> list[str]:
    """The input names of the task fields that ``none`` unsets (for help texts)."""
    back = {v: k for k, v in TASK_INPUT_NAMES.items()}
    return sorted(back.get(f, f) for f in TASK_EDITABLE if f in _TASK_NULLABLE)


def nullable_type_inputs() -> list[str]:
    """The task type fields that ``none`` unsets (for help texts)."""
    return [f for f in TASK_TYPE_EDITABLE if f in _TYPE_NULLABLE]


__all__ = [
    "TASK_EDITABLE",
    "TASK_INPUT_NAMES",
    "TASK_TYPE_EDITABLE",
    "TASK_TYPE_IDLE",
    "Applies",
    "task_changes",
    "task_type_changes",
]
