"""Conversion between domain objects and table rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from ..domain.model import BlackoutPeriod, Task, TaskRun, TaskType
from ..domain.validation import time_of_day

TASK_TYPE_FIELDS = tuple(f.name for f in fields(TaskType))
_TASK_SKIP = {"args", "kwargs", "_arguments_hash", "_arguments_size"}
TASK_FIELDS = tuple(f.name for f in fields(Task) if f.name not in _TASK_SKIP)
RUN_FIELDS = tuple(f.name for f in fields(TaskRun))


def task_type_to_row(task_type: TaskType) -> dict[str, Any]:
    return {name: getattr(task_type, name) for name in TASK_TYPE_FIELDS}


def task_type_from_row(row: Mapping[Any, Any]) -> TaskType:
    return TaskType(**{name: row[name] for name in TASK_TYPE_FIELDS})


def task_to_row(task: Task) -> dict[str, Any]:
    row = {name: getattr(task, name) for name in TASK_FIELDS}
    row["arguments"] = task.arguments
    row["arguments_hash"] = task.arguments_hash
    row["schedule_kind"] = task.schedule_kind.value
    row["status"] = task.status.value
    row["priority"] = task.priority.value
    row["blackout_periods"] = [b.to_json() for b in task.blackout_periods]
    row["dont_run_on_nodes"] = list(task.dont_run_on_nodes)
    if task.id is None:
        del row["id"]
    return row


#: how :func:`task_to_row` writes a column that is not its field as it is
_TASK_COLUMN_VALUES = {
    "arguments": lambda task: task.arguments,
    "arguments_hash": lambda task: task.arguments_hash,
    "schedule_kind": lambda task: task.schedule_kind.value,
    "status": lambda task: task.status.value,
    "priority": lambda task: task.priority.value,
    "blackout_periods": lambda task: [b.to_json() for b in task.blackout_periods],
    "dont_run_on_nodes": lambda task: list(task.dont_run_on_nodes),
}


def task_values(task: Task, columns: Iterable[str]) -> dict[str, Any]:
    """The values :func:`task_to_row` gives ``columns``, and only those."""
    values = vars(task)
    get = _TASK_COLUMN_VALUES.get
    row: dict[str, Any] = {}
    for name in columns:
        convert = get(name)
        row[name] = values[name] if convert is None else convert(task)
    return row


#: the fields of a task stored in another column (or two) than their own
_TASK_FIELD_COLUMNS = {
    "args": ("arguments", "arguments_hash"),
    "kwargs": ("arguments", "arguments_hash"),
}
_TASK_COMPARED = (*TASK_FIELDS, "args", "kwargs")


def task_columns_changed(before: Task, after: Task) -> set[str]:
    """The columns of :func:`task_to_row` whose values differ between two
    versions of a task (compared field by field, without building rows)."""
    old, new = vars(before), vars(after)
    changed: set[str] = set()
    for name in _TASK_COMPARED:
        if old[name] is not new[name] and old[name] != new[name]:
            changed.update(_TASK_FIELD_COLUMNS.get(name, (name,)))
    return changed


def task_from_row(row: Mapping[Any, Any]) -> Task:
    values = {name: row[name] for name in TASK_FIELDS}
    arguments = row["arguments"] or {}
    values["args"] = tuple(arguments.get("args", ()))
    values["kwargs"] = dict(arguments.get("kwargs", {}))
    values["blackout_periods"] = tuple(
        BlackoutPeriod(
            time_of_day("blackout_periods", b["start"]), time_of_day("blackout_periods", b["end"])
        )
        for b in row["blackout_periods"] or ()
    )
    values["dont_run_on_nodes"] = tuple(row["dont_run_on_nodes"] or ())
    return Task.stored(values, arguments_hash=row["arguments_hash"])


def run_to_row(run: TaskRun) -> dict[str, Any]:
    row = {name: getattr(run, name) for name in RUN_FIELDS}
    row["status"] = run.status.value
    row["history"] = [dict(h) for h in run.history]
    if run.id is None:
        del row["id"]
    return row


def run_from_row(row: Mapping[Any, Any]) -> TaskRun:
    return TaskRun.stored({name: row[name] for name in RUN_FIELDS})
