"""The SQLAlchemy Core implementation of :class:`SchedulerStore`.

One code path for PostgreSQL and SQLite; where they differ, the difference
is a capability flag (:class:`Capabilities`) rather than a second branch of
logic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from itertools import islice
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..exceptions import (
    Conflict,
    DuplicateTaskType,
    InvalidInput,
    InvalidTransition,
    KeyConflict,
    NotFound,
    UnknownTaskType,
)
from ..model import (
    END_RUN_STATUSES,
    OPEN_RUN_STATUSES,
    PRIORITY_ORDER,
    Claimed,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
    run_backend_id,
)
from . import rows
from .engine import WRITE_OPTION, capabilities_of, make_engine
from .errors import translated
from .interface import (
    ALL_TASKS,
    READY_CHANNEL,
    ApplyOutcome,
    Capabilities,
    ImportSummary,
    TaskFilter,
)
from .tables import TASK_LIVE_STATUSES
from .tables import task as task_t
from .tables import task_run as run_t
from .tables import task_type as type_t

_CHUNK = 500  # ids or hashes per IN (...) list
_OPEN = [s.value for s in OPEN_RUN_STATUSES]
_FINISHED_TASK = [TaskStatus.COMPLETED.value, TaskStatus.DISABLED.value, TaskStatus.CANCELLED.value]


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SQLAlchemyStore:
    """Scheduler store on a SQLAlchemy engine (PostgreSQL or SQLite)."""

    def __init__(self, engine: sa.Engine, *, owns_engine: bool = False) -> None:
        self.engine = engine
        self._owns_engine = owns_engine
        self._capabilities = capabilities_of(engine)

    @classmethod
    def from_url(cls, url: str | sa.URL, **engine_kwargs: Any) -> SQLAlchemyStore:
        return cls(make_engine(url, **engine_kwargs), owns_engine=True)

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()

    # -- plumbing -----------------------------------------------------------

    @contextmanager
    def _write(self, where: str) -> Iterator[sa.Connection]:
        with translated(where), self.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self, where: str) -> Iterator[sa.Connection]:
        with translated(where), self.engine.connect() as conn, conn.begin():
            yield conn

    def _lock(self, query: sa.Select[Any]) -> sa.Select[Any]:
        """Lock selected rows until commit where the engine can (PostgreSQL);
        SQLite's write transaction already excludes every other writer."""
        if self._capabilities.skip_locked:
            return query.with_for_update()
        return query

    def _insert(
        self,
        conn: sa.Connection,
        table: sa.Table,
        values: list[dict[str, Any]],
        *,
        skip_duplicates: bool = False,
    ) -> list[int]:
        """Insert rows with ids allocated up front; returns the ids in order.

        Allocating first lets the driver's own batched ``executemany`` do the
        insert (psycopg pipelines it), instead of one huge multi-row
        statement with ``RETURNING``. With ``skip_duplicates``, a row that
        would break a unique index is silently not inserted (``ON CONFLICT DO
        NOTHING``): the caller counts which ids exist afterwards.
        """
        if self._capabilities.id_sequences:
            sequence = sa.func.pg_get_serial_sequence(table.name, "id")
            ids = list(
                conn.scalars(
                    sa.select(sa.func.nextval(sequence)).select_from(
                        sa.func.generate_series(1, len(values))
                    )
                )
            )
        else:
            top = conn.scalar(sa.select(sa.func.coalesce(sa.func.max(table.c.id), 0))) or 0
            ids = list(range(top + 1, top + 1 + len(values)))
        for row, new_id in zip(values, ids, strict=True):
            row["id"] = new_id
        if skip_duplicates:
            dialect_insert = (
                postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
            )
            conn.execute(dialect_insert(table).on_conflict_do_nothing(), values)
        else:
            conn.execute(sa.insert(table), values)
        return ids

    def _announce(self, conn: sa.Connection, type_names: Iterable[str]) -> None:
        """Wake runners (on commit) for types that may have new ready tasks."""
        if self._capabilities.notifications:
            for name in sorted(set(type_names)):
                conn.execute(sa.select(sa.func.pg_notify(READY_CHANNEL, name)))

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
        with self._read("get task type") as conn:
            row = conn.execute(sa.select(type_t).where(type_t.c.type == name)).first()
        return rows.task_type_from_row(row._mapping) if row else None

    def get_task_types(self) -> list[TaskType]:
        with self._read("list task types") as conn:
            result = conn.execute(sa.select(type_t).order_by(type_t.c.type))
            return [rows.task_type_from_row(r._mapping) for r in result]

    def update_task_type(self, name: str, **changes: Any) -> TaskType:
        if "type" in changes:
            raise InvalidInput("type", "a task type cannot be renamed")
        with self._write("update task type") as conn:
            row = conn.execute(self._lock(sa.select(type_t).where(type_t.c.type == name))).first()
            if row is None:
                raise NotFound(f"no task type {name!r}")
            updated = rows.task_type_from_row(row._mapping).updated(**changes)
            conn.execute(
                sa.update(type_t)
                .where(type_t.c.type == name)
                .values(rows.task_type_to_row(updated))
            )
        return updated

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
        self._check_types_exist(conn, {t.type for t in batch})
        found: list[Task | None] = [None] * len(batch)
        copy_of: dict[int, int] = {}
        self._match_keyed(conn, batch, found, copy_of)
        if build:
            self._match_identical(conn, batch, found, copy_of)
        fresh = [i for i in range(len(batch)) if found[i] is None and i not in copy_of]
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
                    replace(batch[i], id=new_id, created_at=now, updated_at=now)
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
            if known.definition() != item.definition():
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
                query = sa.select(task_t).where(
                    task_t.c.type == type_name,
                    task_t.c.arguments_hash.in_(chunk),
                    task_t.c.key.is_(None),
                    task_t.c.status.in_(TASK_LIVE_STATUSES),
                )
                for row in conn.execute(query):
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

    def count_tasks(self, criteria: TaskFilter = ALL_TASKS) -> int:
        query = sa.select(sa.func.count()).select_from(task_t).where(*self._where(criteria))
        with self._read("count tasks") as conn:
            return int(conn.scalar(query) or 0)

    def _ready_query(
        self, task_type: str, priority: Priority, now: datetime, limit: int
    ) -> sa.Select[Any]:
        return (
            sa.select(task_t)
            .where(
                task_t.c.type == task_type,
                task_t.c.status == TaskStatus.WAITING.value,
                task_t.c.priority == priority.value,
                task_t.c.next_run <= now,
            )
            .order_by(task_t.c.deadline, task_t.c.id)
            .limit(limit)
        )

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
        query = sa.select(sa.func.min(task_t.c.next_run)).where(
            task_t.c.type == task_type, task_t.c.status == TaskStatus.WAITING.value
        )
        if priorities:
            query = query.where(task_t.c.priority.in_([Priority(p).value for p in priorities]))
        with self._read("next ready time") as conn:
            return conn.scalar(query)  # min() keeps the column's type: aware UTC

    def list_pending(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int = 100,
        priorities: Sequence[Priority] | None = None,
    ) -> list[Task]:
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
                deleted += conn.execute(sa.delete(task_t).where(task_t.c.id.in_(chunk))).rowcount
        return deleted

    def update_task(self, task: Task, *, expected_updated_at: datetime | None = None) -> Task:
        if task.id is None:
            raise InvalidInput("id", "only a stored task (with an id) can be updated")
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

    # -- dispatch -----------------------------------------------------------

    def claim_ready_tasks(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
    ) -> list[Claimed]:
        if limit <= 0:
            return []
        wanted = set(priorities) if priorities else set(PRIORITY_ORDER)
        claimed: list[Claimed] = []
        with self._write("claim ready tasks") as conn:
            for priority in PRIORITY_ORDER:
                if priority in wanted and len(claimed) < limit:
                    claimed.extend(
                        self._claim_class(
                            conn, task_type, priority, now, limit - len(claimed), nodes
                        )
                    )
            self._insert_runs(conn, claimed, now)
        return claimed

    def _claim_class(
        self,
        conn: sa.Connection,
        task_type: str,
        priority: Priority,
        now: datetime,
        limit: int,
        nodes: Sequence[str] | None,
    ) -> list[Claimed]:
        """Mark up to ``limit`` ready tasks of one class scheduled, in one
        statement (``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)``)."""
        picked = (
            self._ready_query(task_type, priority, now, limit)
            .with_only_columns(task_t.c.id)
            .where(self._runnable_on(nodes))
        )
        if self._capabilities.skip_locked:
            picked = picked.with_for_update(skip_locked=True)
        statement = (
            sa.update(task_t)
            .where(task_t.c.id.in_(picked.scalar_subquery()))
            .values(status=TaskStatus.SCHEDULED.value, updated_at=now)
            .returning(
                task_t.c.id,
                task_t.c.next_run,
                task_t.c.deadline,
                task_t.c.arguments,
                task_t.c.dont_run_on_nodes,
            )
        )
        found = sorted(conn.execute(statement).all(), key=lambda r: (r[2], r[0]))
        return [
            Claimed(
                task_id=task_id,
                slot=slot,
                deadline=deadline,
                backend_id=run_backend_id(task_id, slot),
                args=tuple(arguments.get("args", ())),
                kwargs=arguments.get("kwargs", {}),
                dont_run_on_nodes=tuple(banned or ()),
            )
            for task_id, slot, deadline, arguments, banned in found
        ]

    def _runnable_on(self, nodes: Sequence[str] | None) -> sa.ColumnElement[bool]:
        """Tasks that may go to one of ``nodes`` (the live workers' nodes).

        Unconstrained tasks always qualify; a task with ``dont_run_on_nodes``
        qualifies only if some live node is not banned — and never when the
        live nodes are unknown (``nodes is None``)."""
        banned = task_t.c.dont_run_on_nodes
        if self.engine.dialect.name == "postgresql":
            unconstrained = banned == sa.cast(sa.literal("[]"), postgresql.JSONB)
            if not nodes:
                return unconstrained
            everyone = sa.cast(sa.literal(json.dumps(sorted(nodes))), postgresql.JSONB)
            return sa.or_(unconstrained, sa.not_(banned.op("@>", is_comparison=True)(everyone)))
        unconstrained = sa.func.json_array_length(banned) == 0
        if not nodes:
            return unconstrained
        each = sa.func.json_each(banned).table_valued("value")
        allowed = [~sa.exists().select_from(each).where(each.c.value == node) for node in nodes]
        return sa.or_(unconstrained, *allowed)

    def _insert_runs(self, conn: sa.Connection, claimed: list[Claimed], now: datetime) -> None:
        """Create the ``scheduled`` runs of claimed tasks (caller's transaction):
        PostgreSQL's ``COPY`` when available, else a batched insert."""
        if not claimed:
            return
        if self.engine.dialect.name == "postgresql":
            driver = conn.connection.driver_connection
            assert driver is not None
            with (
                driver.cursor() as cursor,
                cursor.copy(
                    "COPY task_run (task_id, backend_id, slot, scheduled, status, history) "
                    "FROM STDIN"
                ) as copy,
            ):
                for c in claimed:
                    copy.write_row(
                        (c.task_id, c.backend_id, c.slot, now, RunStatus.SCHEDULED.value, "[]")
                    )
            return
        conn.execute(
            sa.insert(run_t),
            [
                {
                    "task_id": c.task_id,
                    "backend_id": c.backend_id,
                    "slot": c.slot,
                    "scheduled": now,
                    "status": RunStatus.SCHEDULED.value,
                    "history": [],
                }
                for c in claimed
            ],
        )

    # -- runs ---------------------------------------------------------------

    def schedule_task_run(
        self, task_id: int, *, now: datetime, backend_id: str | None = None
    ) -> TaskRun:
        with self._write("schedule task run") as conn:
            row = conn.execute(self._lock(sa.select(task_t).where(task_t.c.id == task_id))).first()
            if row is None:
                raise NotFound(f"no task {task_id}")
            current = rows.task_from_row(row._mapping)
            if current.status is not TaskStatus.WAITING:
                raise InvalidTransition(
                    f"task {task_id} is {current.status}; only a waiting task can be scheduled"
                )
            conn.execute(
                sa.update(task_t)
                .where(task_t.c.id == task_id)
                .values(status=TaskStatus.SCHEDULED.value, updated_at=now)
            )
            run = TaskRun(
                task_id=task_id,
                backend_id=backend_id or run_backend_id(task_id, current.next_run),
                slot=current.next_run,
                scheduled=now,
            )
            [run_id] = self._insert(conn, run_t, [rows.run_to_row(run)])
            return replace(run, id=run_id)

    def _run_for_update(self, conn: sa.Connection, backend_id: str) -> TaskRun | None:
        query = self._lock(sa.select(run_t).where(run_t.c.backend_id == backend_id))
        row = conn.execute(query).first()
        return rows.run_from_row(row._mapping) if row else None

    def start_task_run(
        self, backend_id: str, *, started: datetime, worker: str | None = None
    ) -> TaskRun | None:
        with self._write("start task run") as conn:
            run = self._run_for_update(conn, backend_id)
            if run is None or run.status is not RunStatus.SCHEDULED:
                return run
            run = replace(run, status=RunStatus.STARTED, started=started, worker=worker)
            conn.execute(
                sa.update(run_t)
                .where(run_t.c.id == run.id)
                .values(status=run.status.value, started=started, worker=worker)
            )
        return run

    def end_task_run(
        self,
        backend_id: str,
        *,
        status: RunStatus,
        ended: datetime,
        result: Any = None,
        error: str | None = None,
        apply: ApplyOutcome | None = None,
    ) -> TaskRun | None:
        status = RunStatus(status)
        if status not in END_RUN_STATUSES:
            raise InvalidInput("status", f"{status} is not a final run status")
        with self._write("end task run") as conn:
            run = self._run_for_update(conn, backend_id)
            if run is None or not run.status.is_open:
                return run
            run = replace(run, status=status, ended=ended, result=result, error=error)
            conn.execute(
                sa.update(run_t)
                .where(run_t.c.id == run.id)
                .values(status=status.value, ended=ended, result=result, error=error)
            )
            if apply is not None:
                query = self._lock(sa.select(task_t).where(task_t.c.id == run.task_id))
                row = conn.execute(query).first()
                if row is not None:
                    new_task = apply(rows.task_from_row(row._mapping), run)
                    values = rows.task_to_row(replace(new_task, updated_at=ended))
                    conn.execute(sa.update(task_t).where(task_t.c.id == run.task_id).values(values))
        return run

    def get_task_run(self, backend_id: str) -> TaskRun | None:
        with self._read("get task run") as conn:
            row = conn.execute(sa.select(run_t).where(run_t.c.backend_id == backend_id)).first()
        return rows.run_from_row(row._mapping) if row else None

    def get_task_runs(self, task_id: int, *, limit: int = 20) -> list[TaskRun]:
        query = (
            sa.select(run_t)
            .where(run_t.c.task_id == task_id)
            .order_by(run_t.c.scheduled.desc(), run_t.c.id.desc())
            .limit(limit)
        )
        with self._read("list task runs") as conn:
            return [rows.run_from_row(r._mapping) for r in conn.execute(query)]

    # -- retention ----------------------------------------------------------

    def delete_old_runs(self, *, ended_before: datetime, limit: int = 10_000) -> int:
        victims = (
            sa.select(run_t.c.id)
            .where(run_t.c.ended < ended_before, run_t.c.status.not_in(_OPEN))
            .limit(limit)
            .scalar_subquery()
        )
        with self._write("delete old runs") as conn:
            return conn.execute(sa.delete(run_t).where(run_t.c.id.in_(victims))).rowcount

    def delete_finished_oneshot_tasks(
        self, *, updated_before: datetime, limit: int = 10_000
    ) -> int:
        victims = (
            sa.select(task_t.c.id)
            .where(
                task_t.c.schedule_kind == ScheduleKind.ONESHOT.value,
                task_t.c.status.in_(_FINISHED_TASK),
                task_t.c.updated_at < updated_before,
            )
            .limit(limit)
            .scalar_subquery()
        )
        with self._write("delete finished one-shot tasks") as conn:
            return conn.execute(sa.delete(task_t).where(task_t.c.id.in_(victims))).rowcount


def _identity(item: Task) -> tuple[str, str, str, str]:
    """What makes two tasks without a key the same task."""
    return (item.type, item.arguments_hash, item.schedule_kind.value, item.priority.value)
