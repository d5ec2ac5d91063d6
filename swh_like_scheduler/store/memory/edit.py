"""A task edited in memory (:meth:`~..role_tasks.TaskStore.edit_task`; the
SQL store's :mod:`..sql_edit`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ...domain.exceptions import DuplicateTask, InvalidInput, NotFound, UnknownTaskType
from ...domain.model import Task, TaskStatus
from ...intake.edit import edited_task
from .state import identity
from .tasks import TaskMethods, as_stored


class EditMethods(TaskMethods):
    """:meth:`edit_task`."""

    def edit_task(
        self,
        *,
        task_id: int | None = None,
        key: str | None = None,
        changes: Mapping[str, Any],
        now: datetime,
    ) -> Task:
        if (task_id is None) == (key is None):
            raise InvalidInput("task", "give either a task id or a key")
        if now.tzinfo is None or now.utcoffset() is None:
            raise InvalidInput("now", f"{now.isoformat()} has no time zone")
        now = now.astimezone(UTC)
        what = f"task {task_id}" if task_id is not None else f"the task with key {key!r}"
        state = self._state
        with self._write("edit task"):
            if task_id is None:
                task_id = state.keys.get(key or "")
            task = state.tasks.get(task_id) if task_id is not None else None
            if task is None:
                raise NotFound(f"no {what}")
            task_type = state.types.get(task.type)
            if task_type is None:
                raise UnknownTaskType(task.type)
            edited = edited_task(task, task_type, changes, now)
            if edited == task:
                return task
            edited.check_arguments_size(self.max_argument_bytes)
            edited.check_arguments_depth()
            self._check_identical(task, edited)
            edited = as_stored(edited.updated(updated_at=now))
            state.put_task(edited)
            if edited.status is TaskStatus.WAITING:
                self._announce([edited.type])  # it may be ready sooner
        return edited

    def _check_identical(self, task: Task, edited: Task) -> None:
        """Refuse an edit that makes a live task without a key identical to
        another live one, naming the field that made it so."""
        same = identity(edited)
        other = self._state.identities.get(same) if same is not None else None
        if other is None or other == task.id:
            return
        changed = [
            name
            for name in ("args", "kwargs", "schedule_kind", "priority")
            if getattr(task, name) != getattr(edited, name)
        ]
        raise DuplicateTask(changed[0] if changed else "arguments", other)
