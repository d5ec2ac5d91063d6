"""Editing tasks and task types in place (:meth:`TaskStore.edit_task`,
:meth:`TaskStore.update_task_type`): one transaction each, the row locked,
a task's new times computed by the policy engine (also those of the tasks
a type edit retimes: :mod:`..policy.type_edit`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from ..domain.enums import check_aware
from ..domain.exceptions import DuplicateTask, InvalidInput, NotFound, TaskBusy, UnknownTaskType
from ..domain.model import (
    OPEN_RUN_STATUSES,
    OWNER_CLEARED,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
)
from ..domain.validation import unstorable
from ..intake.edit import edited_task
from ..intake.editing import TASK_TYPE_EDITABLE, TASK_TYPE_IDLE
from ..policy.type_edit import (
    TaskShape,
    TypeEditEffect,
    TypeEditReport,
    assess_type_edit,
    given_fields,
    retime_effect,
    retime_scope,
    retimed,
)
from . import rows
from .sql_base import SQLBase
from .sql_tasks import identical_query
from .tables import task as task_t
from .tables import task_run as run_t
from .tables import task_type as type_t

#: the tasks a type's settings still govern: live or disabled (a disabled
#: task may be enabled again; completed and cancelled ones never run again)
GOVERNED = (TaskStatus.WAITING, TaskStatus.SCHEDULED, TaskStatus.DISABLED)

#: the columns the type's rules read of a task (:class:`TaskShape`)
_SHAPE_COLUMNS = (
    task_t.c.schedule_kind,
    task_t.c.current_interval,
    task_t.c.period,
    task_t.c.cron,
    task_t.c.tz,
    task_t.c.max_expected_duration,
    task_t.c.max_allowed_duration,
)

#: the tasks a type edit retimes: waiting or disabled, no run holding them
#: (a run's outcome computes the times of its task with the type it reads then)
RETIMED = (TaskStatus.WAITING, TaskStatus.DISABLED)
#: tasks read per query when retiming
RETIME_PAGE = 1000


def check_type_changes(changes: Mapping[str, Any]) -> None:
    """Refuse a change of a task type's name, of its pause (its own
    methods), or of a field that cannot be edited, naming it."""
    if "type" in changes:
        raise InvalidInput("type", "a task type cannot be renamed")
    if "paused_at" in changes:
        raise InvalidInput(
            "paused_at", "a task type is paused and resumed by pause_task_type/resume_task_type"
        )
    for field in changes:
        if field not in TASK_TYPE_EDITABLE:
            raise InvalidInput(field, "is not a task type field that can be changed")


def type_instant(now: datetime | None) -> datetime:
    """The instant a type edit judges cron schedules from (default: the clock)."""
    if now is None:
        return datetime.now(UTC)
    check_aware("now", now)
    return now.astimezone(UTC)


def moved_idle_fields(current: TaskType, changes: Mapping[str, Any]) -> list[str]:
    """The fields of ``changes`` that may change only while no run of the
    type is open (its Celery task name, its queue), and do change."""
    return sorted(n for n in TASK_TYPE_IDLE if n in changes and getattr(current, n) != changes[n])


def busy_type(field: str, open_runs: int, name: str) -> TaskBusy:
    """The refusal of a change of ``field`` while ``open_runs`` runs of
    the type ``name`` are open."""
    return TaskBusy(
        field,
        f"cannot change while {open_runs} run(s) of task type {name!r} are "
        "dispatched or running: their messages name the current Celery task and "
        "queue. Pause the type (task-type pause), wait for its runs to end, then edit",
    )


class EditMethods(SQLBase):
    """:meth:`edit_task` and :meth:`update_task_type`."""

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
        if key is not None and unstorable(key):
            raise NotFound(f"no {what}")
        where = task_t.c.id == task_id if task_id is not None else task_t.c.key == key
        with self._write("edit task") as conn:
            row = conn.execute(self._lock(sa.select(task_t).where(where))).first()
            if row is None:
                raise NotFound(f"no {what}")
            task = rows.task_from_row(row._mapping)
            type_row = conn.execute(sa.select(type_t).where(type_t.c.type == task.type)).first()
            if type_row is None:  # the foreign key keeps this from happening
                raise UnknownTaskType(task.type)
            task_type = rows.task_type_from_row(type_row._mapping)
            edited = edited_task(task, task_type, changes, now)
            if edited == task:
                return task
            edited.check_arguments_size(self.max_argument_bytes)
            edited.check_arguments_depth()
            self._check_identical(conn, task, edited)
            edited = edited.updated(updated_at=now)
            conn.execute(
                sa.update(task_t).where(task_t.c.id == task.id).values(rows.task_to_row(edited))
            )
            if edited.status is TaskStatus.WAITING:
                self._announce(conn, [edited.type])  # it may be ready sooner
        return edited

    def update_task_type(
        self, name: str, *, now: datetime | None = None, **changes: Any
    ) -> TaskType:
        check_type_changes(changes)
        when = type_instant(now)
        with self._write("update task type") as conn:
            current, updated = self._edited_type(conn, name, changes)
            if updated == current:
                return current
            self._check_type_idle(conn, current, changes)
            refusal = self._type_edit_report(conn, current, updated, changes, when).refusal()
            if refusal is not None:
                raise refusal
            conn.execute(
                sa.update(type_t)
                .where(type_t.c.type == name)
                .values(rows.task_type_to_row(updated))
            )
            self._retime(conn, current, updated, when)
        return updated

    def preview_task_type_update(
        self, name: str, *, now: datetime | None = None, **changes: Any
    ) -> TypeEditReport:
        check_type_changes(changes)
        when = type_instant(now)
        with self._read("preview task type update") as conn:
            current, updated = self._edited_type(conn, name, changes, lock=False)
            report = self._type_edit_report(conn, current, updated, changes, when)
            effect = self._retime(conn, current, updated, when, write=False)
            if effect is None:
                return report
            return replace(report, moves=(*report.moves, effect))

    def _edited_type(
        self, conn: sa.Connection, name: str, changes: Mapping[str, Any], *, lock: bool = True
    ) -> tuple[TaskType, TaskType]:
        query = sa.select(type_t).where(type_t.c.type == name)
        row = conn.execute(self._lock(query) if lock else query).first()
        if row is None:
            raise NotFound(f"no task type {name!r}")
        current = rows.task_type_from_row(row._mapping)
        return current, current.updated(**changes)

    def _type_edit_report(
        self,
        conn: sa.Connection,
        current: TaskType,
        updated: TaskType,
        changes: Mapping[str, Any],
        now: datetime,
    ) -> TypeEditReport:
        """What the edit does to the tasks of the type, judged by shape
        (one GROUP BY over the type's governed tasks)."""
        query = (
            sa.select(*_SHAPE_COLUMNS, sa.func.count(), sa.func.min(task_t.c.id))
            .where(
                task_t.c.type == current.type,
                task_t.c.status.in_([s.value for s in GOVERNED]),
            )
            .group_by(*_SHAPE_COLUMNS)
        )
        shapes = [
            TaskShape(
                schedule_kind=ScheduleKind(row[0]),
                current_interval=row[1],
                period=row[2],
                cron=row[3],
                tz=row[4],
                max_expected_duration=row[5],
                max_allowed_duration=row[6],
                count=row[7],
                example=row[8],
            )
            for row in conn.execute(query)
        ]
        given = given_fields({k: v for k, v in changes.items() if getattr(current, k) != v})
        return assess_type_edit(current, updated, given, shapes, now)

    def _retime(
        self,
        conn: sa.Connection,
        current: TaskType,
        updated: TaskType,
        now: datetime,
        *,
        write: bool = True,
    ) -> TypeEditEffect | None:
        """Compute again the times of the tasks of the type whose times the
        edit changes (:func:`~..policy.type_edit.retimed`) and, with
        ``write``, store them (the rows locked as they are read); what was
        (or would be) retimed, or ``None`` for nothing. Reads only the
        tasks the settings changed may move, a page at a time."""
        count, first = 0, None
        waiting = False
        for page in self._retimed_pages(conn, current, updated, now, lock=write):
            count += len(page)
            first = first or page[0]
            waiting = waiting or any(t.status is TaskStatus.WAITING for _, t in page)
            if write:
                conn.execute(
                    sa.update(task_t)
                    .where(task_t.c.id == sa.bindparam("task_id"))
                    .values(
                        next_run=sa.bindparam("new_next_run"),
                        deadline=sa.bindparam("new_deadline"),
                        retries_left=sa.bindparam("new_retries_left"),
                        updated_at=now,
                    ),
                    [
                        {
                            "task_id": t.id,
                            "new_next_run": t.next_run,
                            "new_deadline": t.deadline,
                            "new_retries_left": t.retries_left,
                        }
                        for _, t in page
                    ],
                )
        if write and waiting:
            self._announce(conn, [current.type])  # some may be ready sooner
        return None if first is None else retime_effect(count, *first)

    def _retimed_pages(
        self,
        conn: sa.Connection,
        current: TaskType,
        updated: TaskType,
        now: datetime,
        *,
        lock: bool,
    ) -> Iterator[list[tuple[Task, Task]]]:
        """The tasks the edit retimes, as (before, after), a page of tasks
        read at a time in id order."""
        scope = retime_scope(current, updated)
        if scope is None:
            return
        which: list[sa.ColumnElement[bool]] = []
        if scope.failing:
            which.append(task_t.c.failure_count > 0)
        if scope.defaulted:
            which.append(
                sa.and_(
                    task_t.c.schedule_kind == ScheduleKind.ADAPTIVE.value,
                    task_t.c.current_interval.is_(None),
                )
            )
        after = 0
        while True:
            query = (
                sa.select(task_t)
                .where(
                    task_t.c.type == current.type,
                    task_t.c.status.in_([s.value for s in RETIMED]),
                    *(task_t.c[name].is_(None) for name in OWNER_CLEARED),
                    sa.or_(*which),
                    task_t.c.id > after,
                )
                .order_by(task_t.c.id)
                .limit(RETIME_PAGE)
            )
            found = conn.execute(self._lock(query) if lock else query).all()
            if not found:
                return
            after = found[-1].id
            page = []
            for row in found:
                task = rows.task_from_row(row._mapping)
                moved = retimed(task, current, updated, now)
                if moved is not None:
                    page.append((task, moved))
            if page:
                yield page

    def _check_identical(self, conn: sa.Connection, task: Task, edited: Task) -> None:
        """Refuse an edit that makes a live task without a key identical to
        another live one (the rule of ``ux_task_identical``)."""
        if edited.key is not None or not edited.status.is_live:
            return
        same = (
            task.arguments_hash == edited.arguments_hash
            and task.schedule_kind == edited.schedule_kind
            and task.priority == edited.priority
        )
        if same:
            return
        for row in conn.execute(identical_query(edited.type, [edited.arguments_hash])):
            other = rows.task_from_row(row._mapping)
            if other.id != task.id and (other.schedule_kind, other.priority) == (
                edited.schedule_kind,
                edited.priority,
            ):
                changed = [
                    name
                    for name in ("args", "kwargs", "schedule_kind", "priority")
                    if getattr(task, name) != getattr(edited, name)
                ]
                raise DuplicateTask(changed[0] if changed else "arguments", other.id or 0)

    def _check_type_idle(
        self, conn: sa.Connection, current: TaskType, changes: Mapping[str, Any]
    ) -> None:
        """Refuse a change of the Celery task name or queue while runs of the
        type are open: their messages name the old ones."""
        moved = moved_idle_fields(current, changes)
        if not moved:
            return
        open_runs = conn.scalar(
            sa.select(sa.func.count())
            .select_from(run_t.join(task_t, task_t.c.id == run_t.c.task_id))
            .where(
                task_t.c.type == current.type,
                run_t.c.status.in_([s.value for s in OPEN_RUN_STATUSES]),
            )
        )
        if open_runs:
            raise busy_type(moved[0], open_runs, current.type)
