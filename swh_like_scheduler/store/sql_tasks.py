"""Task types and tasks: the client-facing half of the SQLAlchemy store."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import lru_cache
from itertools import islice
from typing import Any

import sqlalchemy as sa

from ..domain.exceptions import (
    Conflict,
    DuplicateTaskType,
    InvalidInput,
    KeyConflict,
    NotFound,
    UnknownTaskType,
)
from ..domain.model import (
    PRIORITY_ORDER,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
)
from ..domain.validation import unstorable
from ..policy import with_default_cooldown
from . import rows
from .definitions import moved_instant, same_definition
from .interface import (
    ALL_TASKS,
    ImportSummary,
    TaskFilter,
    WaitingEntry,
)
from .sql_base import SQLBase, _chunks
from .tables import LIVE_STATUS, TASK_LIVE_STATUSES, UTCDateTime
from .tables import task as task_t
from .tables import task_condition as cond_t
from .tables import task_run as run_t
from .tables import task_type as type_t

#: Imports creating at least this many tasks refresh the planner's statistics.
ANALYZE_AFTER = 10_000


class TaskMethods(SQLBase):
    """Task types, task creation (idempotent), queries and status changes."""

    # -- task types ---------------------------------------------------------

    def create_task_type(self, task_type: TaskType) -> TaskType:
        with self._write("create task type") as conn:
            exists = conn.execute(
                sa.select(type_t.c.type).where(type_t.c.type == task_type.type)
            ).first()
            if exists:
                raise DuplicateTaskType(task_type.type)
            conn.execute(sa.insert(type_t), rows.task_type_to_row(task_type))
        return task_type

    def get_task_type(self, name: str) -> TaskType | None:
        if unstorable(name):  # no type has such a name (nor could the database compare it)
            return None
        with self._read("get task type") as conn:
            row = conn.execute(sa.select(type_t).where(type_t.c.type == name)).first()
        return rows.task_type_from_row(row._mapping) if row else None

    def get_task_types(self) -> list[TaskType]:
        with self._read("list task types") as conn:
            result = conn.execute(sa.select(type_t).order_by(type_t.c.type))
            return [rows.task_type_from_row(r._mapping) for r in result]

    def pause_task_type(self, name: str, *, now: datetime) -> TaskType:
        if now.tzinfo is None or now.utcoffset() is None:
            raise InvalidInput("now", f"{now.isoformat()} has no time zone")
        return self._set_paused(name, now.astimezone(UTC), "pause task type")

    def resume_task_type(self, name: str) -> TaskType:
        return self._set_paused(name, None, "resume task type")

    def _set_paused(self, name: str, at: datetime | None, where: str) -> TaskType:
        if unstorable(name):
            raise UnknownTaskType(name)
        with self._write(where) as conn:
            row = conn.execute(self._lock(sa.select(type_t).where(type_t.c.type == name))).first()
            if row is None:
                raise UnknownTaskType(name)
            current = rows.task_type_from_row(row._mapping)
            if at is not None and current.paused_at is not None:
                return current  # paused already: the first instant stays
            changed = replace(current, paused_at=at)
            if changed == current:
                return current
            conn.execute(sa.update(type_t).where(type_t.c.type == name).values(paused_at=at))
            if at is None:
                self._announce(conn, [name])  # its ready tasks may be dispatched again
        return changed

    # -- tasks --------------------------------------------------------------

    def create_tasks(self, tasks: Iterable[Task], *, now: datetime) -> list[Task]:
        batch = list(tasks)
        if not batch:
            return []
        with self._write("create tasks") as conn:
            return self._create_batch(conn, batch, now)[0]

    def import_tasks(
        self,
        tasks: Iterable[Task],
        *,
        now: datetime,
        batch_size: int = 1000,
        progress: Callable[[int, int], None] | None = None,
    ) -> ImportSummary:
        created = existing = 0
        with self._write("import tasks") as conn:
            iterator = iter(tasks)
            while batch := list(islice(iterator, batch_size)):
                fresh = self._create_batch(conn, batch, now, build=False)[1]
                created += fresh
                existing += len(batch) - fresh
                if progress is not None:
                    progress(created, existing)
        if created >= ANALYZE_AFTER and self._bound is None:
            # fresh statistics at once (autovacuum may take a while): the
            # claim's plan depends on how many tasks the planner thinks are ready
            with self._write("analyze tasks") as conn:
                self._maintenance(conn)
                conn.execute(sa.text("ANALYZE task"))
        return ImportSummary(created=created, existing=existing)

    def _create_batch(
        self, conn: sa.Connection, batch: list[Task], now: datetime, *, build: bool = True
    ) -> tuple[list[Task], int]:
        """Create ``batch`` in the caller's transaction: (tasks in order, number new).

        With ``build=False`` only the count is wanted: identical tasks without
        a key are then left to the unique index (``ON CONFLICT DO NOTHING``)
        instead of being looked up first, which keeps a bulk import linear
        whatever the planner believes of a table that is filling up inside
        one transaction; the tasks returned are the ones given."""
        for item in batch:
            if item.id is not None:
                raise InvalidInput("id", f"a new task cannot have an id (got {item.id})")
            item.check_arguments_size(self.max_argument_bytes)
            item.check_arguments_depth()
        self._check_types_exist(conn, {t.type for t in batch})
        found: list[Task | None] = [None] * len(batch)
        copy_of: dict[int, int] = {}
        self._match_keyed(conn, batch, found, copy_of)
        if build:
            self._match_identical(conn, batch, found, copy_of)
        fresh = [i for i in range(len(batch)) if found[i] is None and i not in copy_of]
        for i in fresh:  # a periodic task without a cooldown gets the default
            batch[i] = with_default_cooldown(batch[i])
        created = 0
        if fresh:
            values = [rows.task_to_row(batch[i]) for i in fresh]
            for row in values:
                row["created_at"] = row["updated_at"] = now
            ids = self._insert(conn, task_t, values, skip_duplicates=not build)
            created = len(ids) if build else self._count_existing(conn, ids)
            self._announce(conn, (batch[i].type for i in fresh))
            for i, new_id in zip(fresh, ids, strict=True):
                found[i] = (
                    batch[i].updated(id=new_id, created_at=now, updated_at=now)
                    if build
                    else batch[i]
                )
        for i, first in copy_of.items():
            found[i] = found[first]
        return [t for t in found if t is not None], created

    def _count_existing(self, conn: sa.Connection, ids: list[int]) -> int:
        return sum(
            int(conn.scalar(sa.select(sa.func.count()).where(task_t.c.id.in_(chunk))) or 0)
            for chunk in _chunks(ids)
        )

    def _check_types_exist(self, conn: sa.Connection, names: set[str]) -> None:
        known = set(conn.scalars(sa.select(type_t.c.type).where(type_t.c.type.in_(names))))
        for name in sorted(names - known):
            raise UnknownTaskType(name)

    def _match_keyed(
        self,
        conn: sa.Connection,
        batch: list[Task],
        found: list[Task | None],
        copy_of: dict[int, int],
    ) -> None:
        """Tasks whose key is taken resolve to the task holding it."""
        keys = sorted({t.key for t in batch if t.key is not None})
        existing: dict[str, Task] = {}
        for chunk in _chunks(keys):
            for row in conn.execute(sa.select(task_t).where(task_t.c.key.in_(chunk))):
                known = rows.task_from_row(row._mapping)
                existing[str(known.key)] = known
        first_index: dict[str, int] = {}
        for i, item in enumerate(batch):
            if item.key is None:
                continue
            if item.key in existing:
                known = existing[item.key]
            elif item.key in first_index:
                known = batch[first_index[item.key]]
                copy_of[i] = first_index[item.key]
            else:
                first_index[item.key] = i
                continue
            if not same_definition(known, item) or moved_instant(known, item):
                raise KeyConflict(item.key, known.id or 0)
            if item.key in existing:
                found[i] = known

    def _match_identical(
        self,
        conn: sa.Connection,
        batch: list[Task],
        found: list[Task | None],
        copy_of: dict[int, int],
    ) -> None:
        """Tasks without a key resolve to an identical live task, if any."""
        wanted: dict[tuple[str, str, str, str], list[int]] = {}
        for i, item in enumerate(batch):
            if item.key is None:
                wanted.setdefault(_identity(item), []).append(i)
        digests_by_type: dict[str, set[str]] = {}
        for type_name, digest, _, _ in wanted:
            digests_by_type.setdefault(type_name, set()).add(digest)
        for type_name, digests in digests_by_type.items():
            for chunk in _chunks(sorted(digests)):
                for row in conn.execute(identical_query(type_name, chunk)):
                    known = rows.task_from_row(row._mapping)
                    for i in wanted.pop(_identity(known), ()):
                        found[i] = known
        for indexes in wanted.values():
            for i in indexes[1:]:
                copy_of[i] = indexes[0]

    def get_tasks(self, ids: Sequence[int]) -> list[Task]:
        by_id: dict[int, Task] = {}
        with self._read("get tasks") as conn:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                for row in conn.execute(sa.select(task_t).where(task_t.c.id.in_(chunk))):
                    item = rows.task_from_row(row._mapping)
                    by_id[row.id] = item
        return [by_id[i] for i in ids if i in by_id]

    def get_task_by_key(self, key: str) -> Task | None:
        if unstorable(key):
            return None
        with self._read("get task by key") as conn:
            row = conn.execute(sa.select(task_t).where(task_t.c.key == key)).first()
        return rows.task_from_row(row._mapping) if row else None

    def _where(self, criteria: TaskFilter) -> list[sa.ColumnElement[bool]]:
        clauses: list[sa.ColumnElement[bool]] = []
        if criteria.type is not None:
            clauses.append(task_t.c.type == criteria.type)
        if criteria.status is not None:
            clauses.append(task_t.c.status.in_([TaskStatus(s).value for s in criteria.status]))
        if criteria.priority is not None:
            clauses.append(task_t.c.priority == Priority(criteria.priority).value)
        if criteria.schedule_kind is not None:
            clauses.append(task_t.c.schedule_kind == ScheduleKind(criteria.schedule_kind).value)
        if criteria.key_prefix is not None:
            clauses.append(task_t.c.key.startswith(criteria.key_prefix, autoescape=True))
        if criteria.next_run_before is not None:
            clauses.append(task_t.c.next_run <= criteria.next_run_before)
        return clauses

    def search_tasks(
        self, criteria: TaskFilter = ALL_TASKS, *, after_id: int = 0, limit: int = 100
    ) -> list[Task]:
        if limit <= 0:
            raise InvalidInput("limit", f"{limit} must be a positive number")
        query = (
            sa.select(task_t)
            .where(task_t.c.id > after_id, *self._where(criteria))
            .order_by(task_t.c.id)
            .limit(limit)
        )
        with self._read("search tasks") as conn:
            return [rows.task_from_row(r._mapping) for r in conn.execute(query)]

    def waiting_entries(
        self,
        task_type: str,
        priority: Priority,
        *,
        after: tuple[datetime, int] | None = None,
        until: tuple[datetime, int] | None = None,
        limit: int = 10_000,
    ) -> list[WaitingEntry]:
        if limit <= 0:
            raise InvalidInput("limit", f"{limit} must be a positive number")
        key = sa.tuple_(task_t.c.deadline, task_t.c.id)
        # the status as a literal: ix_task_dispatch_order's predicate, which
        # a bound value could not prove under a generic plan
        query = (
            sa.select(task_t.c.id, task_t.c.next_run, task_t.c.deadline)
            .where(
                task_t.c.type == task_type,
                task_t.c.priority == priority.value,
                task_t.c.status == sa.literal_column("'waiting'"),
            )
            .order_by(task_t.c.deadline, task_t.c.id)
            .limit(limit)
        )
        if after is not None:
            query = query.where(key > sa.tuple_(*_key_values(after)))
        if until is not None:
            query = query.where(key <= sa.tuple_(*_key_values(until)))
        with self._read("read waiting tasks") as conn:
            return [WaitingEntry(*r) for r in conn.execute(query)]

    def count_tasks(self, criteria: TaskFilter = ALL_TASKS) -> int:
        query = sa.select(sa.func.count()).select_from(task_t).where(*self._where(criteria))
        with self._read("count tasks") as conn:
            return int(conn.scalar(query) or 0)

    def _ready(
        self,
        conn: sa.Connection,
        task_type: str,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None,
    ) -> list[Task]:
        chosen: list[Task] = []
        wanted = set(priorities) if priorities else set(PRIORITY_ORDER)
        for priority in PRIORITY_ORDER:
            if len(chosen) >= limit:
                break
            if priority not in wanted:
                continue
            query = self._ready_query(task_type, priority, now, limit - len(chosen))
            chosen.extend(rows.task_from_row(r._mapping) for r in conn.execute(query))
        return chosen

    def next_ready_time(
        self, task_type: str, *, priorities: Sequence[Priority] | None = None
    ) -> datetime | None:
        wanted = set(priorities) if priorities else set(PRIORITY_ORDER)
        statement = _next_ready_statement(tuple(p for p in PRIORITY_ORDER if p in wanted))
        with self._read("next ready time") as conn:
            found = conn.execute(statement, {"ready_type": task_type}).one()
        return min((t for t in found if t is not None), default=None)

    def list_pending(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int = 100,
        priorities: Sequence[Priority] | None = None,
    ) -> list[Task]:
        if limit < 1:  # SQLite reads LIMIT -1 as no limit at all
            raise InvalidInput("limit", f"{limit} must be a positive number")
        with self._read("list pending tasks") as conn:
            return self._ready(conn, task_type, now, limit, priorities)

    def _update_tasks(
        self,
        conn: sa.Connection,
        ids: Sequence[int],
        condition: sa.ColumnElement[bool],
        values: dict[str, Any],
    ) -> list[Task]:
        changed: list[Task] = []
        for chunk in _chunks(list(dict.fromkeys(ids))):
            query = (
                sa.update(task_t)
                .where(task_t.c.id.in_(chunk), condition)
                .values(**values)
                .returning(*task_t.c)
            )
            changed.extend(rows.task_from_row(r._mapping) for r in conn.execute(query))
        order = {task_id: n for n, task_id in enumerate(ids)}
        return sorted(changed, key=lambda t: order[t.id or 0])

    def disable_tasks(self, ids: Sequence[int], *, now: datetime) -> list[Task]:
        with self._write("disable tasks") as conn:
            return self._update_tasks(
                conn,
                ids,
                task_t.c.status.in_(TASK_LIVE_STATUSES),
                {"status": TaskStatus.DISABLED.value, "updated_at": now},
            )

    def enable_tasks(self, ids: Sequence[int], *, now: datetime) -> list[Task]:
        with self._write("enable tasks") as conn:
            enabled = self._update_tasks(
                conn,
                ids,
                task_t.c.status == TaskStatus.DISABLED.value,
                {"status": TaskStatus.WAITING.value, "updated_at": now},
            )
            self._announce(conn, (t.type for t in enabled))
        return enabled

    def cancel_tasks(self, ids: Sequence[int], *, now: datetime) -> list[Task]:
        cancellable = [
            TaskStatus.WAITING.value,
            TaskStatus.SCHEDULED.value,
            TaskStatus.DISABLED.value,
        ]
        with self._write("cancel tasks") as conn:
            cancelled = self._update_tasks(
                conn,
                ids,
                task_t.c.status.in_(cancellable),
                {"status": TaskStatus.CANCELLED.value, "updated_at": now},
            )
            for chunk in _chunks([t.id for t in cancelled]):
                conn.execute(
                    sa.update(run_t)
                    .where(run_t.c.task_id.in_(chunk), run_t.c.status == RunStatus.SCHEDULED.value)
                    .values(status=RunStatus.CANCELLED.value, ended=now)
                )
        return cancelled

    def respawn_tasks(self, ids: Sequence[int], *, next_run: datetime, now: datetime) -> list[Task]:
        retries = (
            sa.select(sa.func.coalesce(type_t.c.num_retries, 0))
            .where(type_t.c.type == task_t.c.type)
            .scalar_subquery()
        )
        with self._write("respawn tasks") as conn:
            respawned = self._update_tasks(
                conn,
                ids,
                task_t.c.status != TaskStatus.SCHEDULED.value,
                {
                    "status": TaskStatus.WAITING.value,
                    "next_run": next_run,
                    "deadline": next_run,
                    "failure_count": 0,
                    "retries_left": retries,
                    "updated_at": now,
                },
            )
            self._announce(conn, (t.type for t in respawned))
        return respawned

    def delete_tasks(self, ids: Sequence[int]) -> int:
        deleted = 0
        with self._write("delete tasks") as conn:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                conn.execute(sa.delete(cond_t).where(cond_t.c.task_id.in_(chunk)))
                deleted += conn.execute(sa.delete(task_t).where(task_t.c.id.in_(chunk))).rowcount
        return deleted

    def update_task(self, task: Task, *, expected_updated_at: datetime | None = None) -> Task:
        if task.id is None:
            raise InvalidInput("id", "only a stored task (with an id) can be updated")
        task.check_arguments_size(self.max_argument_bytes)
        task.check_arguments_depth()
        values = rows.task_to_row(task)
        with self._write("update task") as conn:
            query = sa.update(task_t).where(task_t.c.id == task.id).values(values)
            if expected_updated_at is not None:
                query = query.where(task_t.c.updated_at == expected_updated_at)
            if conn.execute(query).rowcount == 1:
                return task
            exists = conn.execute(sa.select(task_t.c.id).where(task_t.c.id == task.id)).first()
        if exists is None:
            raise NotFound(f"no task {task.id}")
        raise Conflict(f"task {task.id} was changed by someone else; read it again and retry")


def identical_query(type_name: str, digests: Sequence[str]) -> sa.Select[Any]:
    """The live tasks without a key of ``type_name`` whose arguments have
    one of these digests: what ``ux_task_identical`` answers (its predicate
    written as it is, see :data:`LIVE_STATUS`)."""
    return sa.select(task_t).where(
        task_t.c.type == type_name,
        task_t.c.arguments_hash.in_(digests),
        task_t.c.key.is_(None),
        LIVE_STATUS,
    )


def _key_values(key: tuple[datetime, int]) -> tuple[Any, Any]:
    deadline, task_id = key
    return sa.literal(deadline, UTCDateTime), sa.literal(task_id, sa.BigInteger)


def _identity(item: Task) -> tuple[str, str, str, str]:
    """What makes two tasks without a key the same task."""
    return (item.type, item.arguments_hash, item.schedule_kind.value, item.priority.value)


@lru_cache(maxsize=8)
def _next_ready_statement(classes: tuple[Priority, ...]) -> sa.Select[Any]:
    """The earliest next_run of the waiting tasks of a type (parameter
    ``ready_type``) in each of ``classes``: one index probe per class
    (``ix_task_ready`` is per type and class). Built once: a runner asks
    for it at every pass, and building the expression cost more than
    running it."""
    task_type = sa.bindparam("ready_type", type_=sa.Text)
    return sa.select(
        *(
            sa.select(sa.func.min(task_t.c.next_run))
            .where(
                task_t.c.type == task_type,
                task_t.c.status == TaskStatus.WAITING.value,
                task_t.c.priority == priority.value,
            )
            .scalar_subquery()
            for priority in classes
        )
    )
