"""A task or a task type edited in memory (:meth:`~..role_tasks.TaskStore.
edit_task`, :meth:`~..role_tasks.TaskStore.update_task_type`; the SQL
store's :mod:`..sql_edit`, whose rules, from :mod:`...policy.type_edit`, are
the same)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from ...domain.exceptions import DuplicateTask, InvalidInput, NotFound, UnknownTaskType
from ...domain.model import OWNER_CLEARED, ScheduleKind, Task, TaskStatus, TaskType
from ...intake.edit import edited_task
from ...policy.type_edit import (
    TaskShape,
    TypeEditEffect,
    TypeEditReport,
    assess_type_edit,
    given_fields,
    retime_effect,
    retime_scope,
    retimed,
)
from ..sql_edit import (
    GOVERNED,
    RETIMED,
    busy_type,
    check_type_changes,
    moved_idle_fields,
    type_instant,
)
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

    # -- task types -------------------------------------------------------------

    def update_task_type(
        self, name: str, *, now: datetime | None = None, **changes: Any
    ) -> TaskType:
        check_type_changes(changes)
        when = type_instant(now)
        state = self._state
        with self._write("update task type"):
            current, updated = self._edited_type(name, changes)
            if updated == current:
                return current
            moved = moved_idle_fields(current, changes)
            if moved:
                open_runs = sum(
                    1
                    for run in state.runs.values()
                    if run.status.is_open
                    and (task := state.tasks.get(run.task_id)) is not None
                    and task.type == name
                )
                if open_runs:
                    raise busy_type(moved[0], open_runs, name)
            refusal = self._type_edit_report(current, updated, changes, when).refusal()
            if refusal is not None:
                raise refusal
            state.put_type(updated)
            self._retime(current, updated, when)
        return updated

    def preview_task_type_update(
        self, name: str, *, now: datetime | None = None, **changes: Any
    ) -> TypeEditReport:
        check_type_changes(changes)
        when = type_instant(now)
        with self._state.lock:
            current, updated = self._edited_type(name, changes)
            report = self._type_edit_report(current, updated, changes, when)
            effect = self._retime(current, updated, when, write=False)
        return report if effect is None else replace(report, moves=(*report.moves, effect))

    def _edited_type(self, name: str, changes: Mapping[str, Any]) -> tuple[TaskType, TaskType]:
        current = self._state.types.get(name)
        if current is None:
            raise NotFound(f"no task type {name!r}")
        return current, current.updated(**changes)

    def _type_edit_report(
        self, current: TaskType, updated: TaskType, changes: Mapping[str, Any], now: datetime
    ) -> TypeEditReport:
        """What the edit does to the tasks of the type, judged by shape."""
        shapes: dict[tuple[Any, ...], list[int]] = {}
        for task in self._state.tasks.values():
            if task.type == current.type and task.status in GOVERNED:
                shape = (
                    task.schedule_kind.value,
                    task.current_interval,
                    task.period,
                    task.cron,
                    task.tz,
                    task.max_expected_duration,
                    task.max_allowed_duration,
                )
                found = shapes.setdefault(shape, [0, task.id or 0])
                found[0] += 1
                found[1] = min(found[1], task.id or 0)
        judged = [
            TaskShape(
                schedule_kind=ScheduleKind(shape[0]),
                current_interval=shape[1],
                period=shape[2],
                cron=shape[3],
                tz=shape[4],
                max_expected_duration=shape[5],
                max_allowed_duration=shape[6],
                count=count,
                example=example,
            )
            for shape, (count, example) in shapes.items()
        ]
        given = given_fields({k: v for k, v in changes.items() if getattr(current, k) != v})
        return assess_type_edit(current, updated, given, judged, now)

    def _retime(
        self, current: TaskType, updated: TaskType, now: datetime, *, write: bool = True
    ) -> TypeEditEffect | None:
        """Compute again the times of the tasks of the type whose times the
        edit changes and, with ``write``, store them; what was (or would
        be) retimed, or ``None`` for nothing."""
        scope = retime_scope(current, updated)
        if scope is None:
            return None
        state = self._state
        moves: list[tuple[Task, Task]] = []
        for task_id in sorted(state.tasks):
            task = state.tasks[task_id]
            if (
                task.type != current.type
                or task.status not in RETIMED
                or any(getattr(task, name) is not None for name in OWNER_CLEARED)
                or not (
                    (scope.failing and task.failure_count > 0)
                    or (
                        scope.defaulted
                        and task.schedule_kind is ScheduleKind.ADAPTIVE
                        and task.current_interval is None
                    )
                )
            ):
                continue
            moved = retimed(task, current, updated, now)
            if moved is not None:
                moves.append((task, moved))
        if write:
            for _, moved in moves:
                state.put_task(moved.updated(updated_at=now))
            if any(t.status is TaskStatus.WAITING for _, t in moves):
                self._announce([current.type])  # some may be ready sooner
        return retime_effect(len(moves), *moves[0]) if moves else None
