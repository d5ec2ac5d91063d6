"""Actions on every task a filter matches, in batches (:class:`BulkStore`).

A call reads a window of the tasks the SQL part of the filter selects
(type, status, key prefix, ids, and the statuses the action applies to),
``batch_size`` rows at a time by increasing id, outside any write
transaction. The rest of the filter (the condition, computed by the policy
engine at ``now``, and the argument match) is checked in Python. Each
batch's matching ids are then written in a short transaction of their own
that locks the rows and checks the whole filter again on what it locked:
a task changed since the read is left as it is. Other readers and writers
wait for at most one batch's rows, never for the whole action.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from .. import policy
from ..domain.exceptions import InvalidInput
from ..domain.model import RunStatus, Task, TaskStatus, TaskType
from . import rows
from .sql_base import SQLBase
from .tables import task as task_t
from .tables import task_condition as cond_t
from .tables import task_run as run_t
from .tables import task_type as type_t
from .values import (
    BULK_MAX_SCAN,
    BULK_SAMPLE,
    BulkAction,
    BulkFilter,
    BulkReport,
)

#: the statuses each action applies to (``None``: any)
APPLIES_TO: dict[BulkAction, tuple[TaskStatus, ...] | None] = {
    BulkAction.DISABLE: (TaskStatus.WAITING, TaskStatus.SCHEDULED),
    BulkAction.ENABLE: (TaskStatus.DISABLED,),
    BulkAction.CANCEL: (TaskStatus.WAITING, TaskStatus.SCHEDULED, TaskStatus.DISABLED),
    BulkAction.DELETE: None,
}
#: the status each action writes
NEW_STATUS = {
    BulkAction.DISABLE: TaskStatus.DISABLED,
    BulkAction.ENABLE: TaskStatus.WAITING,
    BulkAction.CANCEL: TaskStatus.CANCELLED,
}
OPEN_RUN = (RunStatus.SCHEDULED.value, RunStatus.STARTED.value)
MAX_BATCH = 10_000


def _open_run() -> sa.ColumnElement[bool]:
    """The task has an open run (a delete holds it)."""
    return sa.or_(
        task_t.c.status == TaskStatus.SCHEDULED.value,
        sa.exists().where(run_t.c.task_id == task_t.c.id, run_t.c.status.in_(OPEN_RUN)),
    )


@dataclass
class _Tally:
    """A call's figures as it goes."""

    action: BulkAction
    matched: int = 0
    changed: int = 0
    held: int = 0
    sample: list[int] = field(default_factory=list)
    revoke: list[str] = field(default_factory=list)
    changed_ids: list[int] = field(default_factory=list)
    types: set[str] = field(default_factory=set)

    def saw(self, ids: Sequence[int]) -> None:
        self.matched += len(ids)
        self.sample.extend(ids[: BULK_SAMPLE - len(self.sample)])

    def report(self, next_after_id: int | None) -> BulkReport:
        return BulkReport(
            action=self.action,
            matched=self.matched,
            changed=self.changed,
            held=self.held,
            sample=tuple(self.sample),
            revoke=tuple(self.revoke),
            changed_ids=tuple(self.changed_ids),
            types=tuple(sorted(self.types)),
            next_after_id=next_after_id,
        )


class BulkMethods(SQLBase):
    """:class:`BulkStore` on SQLAlchemy (PostgreSQL and SQLite)."""

    def preview_bulk(
        self,
        action: BulkAction,
        criteria: BulkFilter,
        *,
        now: datetime,
        after_id: int = 0,
        scan: int = 10_000,
    ) -> BulkReport:
        return self._bulk(action, criteria, now, after_id, scan, MAX_BATCH, write=False)

    def apply_bulk(
        self,
        action: BulkAction,
        criteria: BulkFilter,
        *,
        now: datetime,
        after_id: int = 0,
        scan: int = 10_000,
        batch_size: int = 1000,
    ) -> BulkReport:
        return self._bulk(action, criteria, now, after_id, scan, batch_size, write=True)

    def _bulk(
        self,
        action: BulkAction,
        criteria: BulkFilter,
        now: datetime,
        after_id: int,
        scan: int,
        batch_size: int,
        *,
        write: bool,
    ) -> BulkReport:
        action = _checked(action, criteria, now, after_id, scan, batch_size)
        now = now.astimezone(UTC)
        with self._read("read task types") as conn:
            types = {
                r.type: rows.task_type_from_row(r._mapping) for r in conn.execute(sa.select(type_t))
            }
        tally = _Tally(action)
        after, read = after_id, 0
        wanted = sorted(set(criteria.ids)) if criteria.ids is not None else None
        while read < scan:
            size = min(batch_size, scan - read)
            ids = None if wanted is None else [i for i in wanted if i > after][:size]
            if ids == []:
                return tally.report(None)
            page = self._page(action, criteria, after, size, ids)
            read += len(page) if ids is None else len(ids)
            if ids is not None:
                after = ids[-1]
            elif not page:
                return tally.report(None)
            else:
                after = page[-1][0]
            matching = [p for p in page if _passes(criteria, p[1], types, now)]
            held = {p[0] for p in matching if p[2]}
            tally.saw([p[0] for p in matching])
            tally.held += len(held)
            chosen = [p[0] for p in matching if p[0] not in held]
            if write and chosen:
                self._write_batch(action, criteria, chosen, types, now, tally)
            if ids is None and len(page) < size:
                return tally.report(None)
            if ids is not None and ids[-1] == wanted[-1]:  # type: ignore[index]
                return tally.report(None)
        return tally.report(after)

    def _page(
        self,
        action: BulkAction,
        criteria: BulkFilter,
        after: int,
        size: int,
        ids: list[int] | None,
    ) -> list[tuple[int, Task | None, bool]]:
        """The next tasks the SQL part selects: (id, the task when Python
        must look at it, whether a delete must hold it)."""
        rowwise = criteria.condition is not None or bool(criteria.arguments)
        columns: list[Any] = list(task_t.c) if rowwise else [task_t.c.id]
        held = _open_run() if action is BulkAction.DELETE else sa.false()
        query = (
            sa.select(*columns, held.label("bulk_held"))
            .where(task_t.c.id > after, *_where(action, criteria, ids))
            .order_by(task_t.c.id)
            .limit(size)
        )
        with self._read("read tasks to act on") as conn:
            return [
                (r.id, rows.task_from_row(r._mapping) if rowwise else None, bool(r.bulk_held))
                for r in conn.execute(query)
            ]

    def _write_batch(
        self,
        action: BulkAction,
        criteria: BulkFilter,
        chosen: list[int],
        types: dict[str, TaskType],
        now: datetime,
        tally: _Tally,
    ) -> None:
        where = [*_where(action, criteria, chosen)]
        if action is BulkAction.DELETE:
            where.append(sa.not_(_open_run()))
        with self._write(f"{action.value} tasks") as conn:
            if criteria.condition is not None or criteria.arguments:
                # lock the rows, then look at them again: what changed since
                # the read may match no more
                locked = conn.execute(self._lock(sa.select(task_t).where(*where)))
                tasks = [rows.task_from_row(r._mapping) for r in locked]
                ids = [t.id for t in tasks if _passes(criteria, t, types, now)]
                where = [*where, task_t.c.id.in_(ids)]
            if action is BulkAction.DELETE:
                done = list(conn.execute(sa.delete(task_t).where(*where).returning(*_IDS)))
                gone = [r.id for r in done]
                conn.execute(sa.delete(cond_t).where(cond_t.c.task_id.in_(gone)))
            elif action is BulkAction.ENABLE:
                done = _enable(conn, where, now)
                self._announce(conn, (r.type for r in done))
            else:
                done = _set_status(conn, where, NEW_STATUS[action], now)
            if action is BulkAction.CANCEL and done:
                ended = conn.execute(
                    sa.update(run_t)
                    .where(
                        run_t.c.task_id.in_([r.id for r in done]),
                        run_t.c.status == RunStatus.SCHEDULED.value,
                    )
                    .values(status=RunStatus.CANCELLED.value, ended=now)
                    .returning(run_t.c.backend_id, run_t.c.started)
                )
                tally.revoke.extend(r.backend_id for r in ended if r.started is None)
        tally.changed += len(done)
        tally.held += len(chosen) - len(done)
        tally.changed_ids.extend(r.id for r in done)
        tally.types.update(r.type for r in done)


_IDS = (task_t.c.id, task_t.c.type)


def _set_status(
    conn: sa.Connection, where: list[sa.ColumnElement[bool]], status: TaskStatus, now: datetime
) -> list[Any]:
    query = (
        sa.update(task_t).where(*where).values(status=status.value, updated_at=now).returning(*_IDS)
    )
    return list(conn.execute(query))


def _enable(conn: sa.Connection, where: list[sa.ColumnElement[bool]], now: datetime) -> list[Any]:
    """Enable the batch at once; if a task of it is identical to a live
    one (``ux_task_identical``), one at a time, holding those."""
    try:
        with conn.begin_nested():
            return _set_status(conn, where, TaskStatus.WAITING, now)
    except sa.exc.IntegrityError:
        pass
    done: list[Any] = []
    for task_id in conn.scalars(sa.select(task_t.c.id).where(*where).order_by(task_t.c.id)):
        try:
            with conn.begin_nested():
                done += _set_status(conn, [task_t.c.id == task_id], TaskStatus.WAITING, now)
        except sa.exc.IntegrityError:
            continue
    return done


def _where(
    action: BulkAction, criteria: BulkFilter, ids: Sequence[int] | None
) -> list[sa.ColumnElement[bool]]:
    """The SQL part of the filter and the statuses the action applies to."""
    clauses: list[sa.ColumnElement[bool]] = []
    if ids is not None:
        clauses.append(task_t.c.id.in_(list(ids)))
    if criteria.type is not None:
        clauses.append(task_t.c.type == criteria.type)
    if criteria.schedule_kind is not None:
        clauses.append(task_t.c.schedule_kind == criteria.schedule_kind.value)
    if criteria.status is not None:
        clauses.append(task_t.c.status.in_([s.value for s in criteria.status]))
    if criteria.key_prefix is not None:
        clauses.append(task_t.c.key.startswith(criteria.key_prefix, autoescape=True))
    applies = APPLIES_TO[action]
    if applies is not None:
        clauses.append(task_t.c.status.in_([s.value for s in applies]))
    return clauses


def _passes(
    criteria: BulkFilter, task: Task | None, types: dict[str, TaskType], now: datetime
) -> bool:
    """The Python part of the filter (``task`` is ``None`` when there is none)."""
    if task is None:
        return True
    if criteria.arguments and not criteria.matches_arguments(task):
        return False
    if criteria.condition is not None:
        level = policy.condition(task, types[task.type], now).level.value
        return level in criteria.condition
    return True


def _checked(
    action: Any, criteria: Any, now: datetime, after_id: int, scan: int, batch_size: int
) -> BulkAction:
    try:
        action = BulkAction(action)
    except ValueError:
        known = ", ".join(a.value for a in BulkAction)
        raise InvalidInput("action", f"{action!r} is not one of {known}") from None
    if not isinstance(criteria, BulkFilter):
        raise InvalidInput("criteria", "must be a BulkFilter")
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInput("now", "must be an instant with a time zone")
    for name, value, low, high in (
        ("after_id", after_id, 0, 2**63 - 1),
        ("scan", scan, 1, BULK_MAX_SCAN),
        ("batch_size", batch_size, 1, MAX_BATCH),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidInput(name, f"{value!r} is not a whole number from {low} to {high}")
    return action
