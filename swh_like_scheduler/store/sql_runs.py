"""Claims, runs and retention: the dispatching half of the SQLAlchemy store."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

import sqlalchemy as sa

from ..domain.enums import LONG_RUN, LONG_RUN_FLOOR, check_aware
from ..domain.exceptions import InvalidInput, InvalidTransition, NotFound
from ..domain.model import (
    PRIORITY_ORDER,
    BlackoutPeriod,
    Claimed,
    DispatchOrder,
    Priority,
    RunStatus,
    ScheduleKind,
    TaskRun,
    TaskStatus,
    run_backend_id,
)
from ..domain.validation import unstorable
from ..policy import leave_blackouts, window_at
from . import rows
from .sql_claim import (
    SPARSE_FACTOR,
    order_values,
    ordered_ids_statement,
    prepared_candidates,
    prepared_claim,
    prepared_probe,
    runnable_on,
)
from .sql_dispatch import DispatchMethods
from .sql_ends import _OPEN, RunEndMethods
from .sql_identity import IdentityMethods
from .sql_long import LONG_RUNS, SHORT_SLACK, long_values
from .tables import task as task_t
from .tables import task_condition as cond_t
from .tables import task_run as run_t
from .values import LongRuns

_FINISHED_TASK = [
    s.value for s in (TaskStatus.COMPLETED, TaskStatus.DISABLED, TaskStatus.CANCELLED)
]


class RunMethods(RunEndMethods, DispatchMethods, IdentityMethods):
    """Claiming ready tasks with their runs, run life cycle, retention."""

    #: PostgreSQL cancels a claim (and the read of ready ids) running longer
    #: than this (:class:`StatementTimeout`, nothing written): whatever the
    #: planner does, a claim never holds its locks for minutes. ``None``: no limit.
    claim_timeout: timedelta | None = timedelta(seconds=30)

    #: Planner settings of a claim's transaction (PostgreSQL). The claim's
    #: statements are written to be ordered index scans that stop after the
    #: rows they need; with statistics taken when the ready set was larger
    #: the planner chose a bitmap scan of ``ix_task_ready`` instead, which
    #: never marks the dead index entries of tasks claimed earlier as dead
    #: (a plain index scan does), so at the tail of a backlog with
    #: autovacuum behind, every claim re-read every dead entry and its heap
    #: page: 2-12 s statements at 50k. ``{}``: the planner's own choice.
    claim_planner: Mapping[str, str] = MappingProxyType({"enable_bitmapscan": "off"})

    def _limit_time(self, conn: sa.Connection) -> None:
        """The time limit and planner settings of a claim (or of the read
        of the ids to claim), local to its transaction."""
        # (not inside a caller's transaction: SET LOCAL would outlive the claim)
        if not self._capabilities.writable_ctes or self._bound:
            return
        settings = dict(self.claim_planner)
        if self.claim_timeout is not None:
            ms = max(1, int(self.claim_timeout.total_seconds() * 1000))
            settings["statement_timeout"] = str(ms)
        if settings:  # one round trip: set_config(..., is_local => true) each
            conn.execute(sa.select(*(sa.func.set_config(k, v, True) for k, v in settings.items())))

    # -- dispatch -----------------------------------------------------------

    def claim_ready_tasks(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
        among: Sequence[int] | None = None,
        order: DispatchOrder = DispatchOrder.DEADLINE,
        short_only: bool = False,
        long_run: timedelta = LONG_RUN,
    ) -> list[Claimed]:
        order = dispatch_order(order)
        if limit <= 0 or (among is not None and not among):
            return []
        classes = _classes(priorities)
        claimed: list[Claimed] = []
        self._refresh_statistics()
        with self._write("claim ready tasks") as conn:
            # before the time limit, which is the claim's own: a type's row
            # may wait for a pause being written
            if self._type_paused(conn, task_type):
                return []  # nothing of a paused type is dispatched
            self._limit_time(conn)
            batch = self._new_batch(conn, now)
            if self._capabilities.writable_ctes:
                if among is None:
                    values, sparse = self._probe(conn, task_type, classes, now, limit)
                else:
                    values = {"claim_now": now, "claim_limit": limit, "claim_ids": list(among)}
                    sparse = frozenset()
                values.update(order_values(now), **long_values(long_run))
                statement = prepared_claim(
                    self.engine.dialect,
                    task_type,
                    classes,
                    _node_key(nodes),
                    sparse,
                    among is not None,
                    order,
                    short_only,
                )
                namespace = self._run_namespace(conn).bytes
                found = statement.rows(conn, claim_batch=batch, claim_namespace=namespace, **values)
                claimed = [
                    _claim(task_id, slot, deadline, backend_id, arguments, banned, batch)
                    for task_id, slot, deadline, arguments, banned, backend_id, *_ in (
                        self._outside_blackouts(conn, found, now)
                    )
                ]
            else:
                for priority in classes:
                    if len(claimed) < limit:
                        claimed.extend(
                            self._claim_class(
                                conn,
                                task_type,
                                priority,
                                now,
                                limit - len(claimed),
                                nodes,
                                among,
                                batch,
                                order,
                                short_only,
                                long_run,
                            )
                        )
                self._insert_runs(conn, claimed, now)
            if not claimed:
                self._drop_batch(conn, batch)
        return claimed

    def ready_task_ids(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
        order: DispatchOrder = DispatchOrder.DEADLINE,
        short_only: bool = False,
        long_run: timedelta = LONG_RUN,
    ) -> list[int]:
        order = dispatch_order(order)
        if limit <= 0:
            return []
        classes = _classes(priorities)
        self._refresh_statistics()
        with self._read("read ready tasks") as conn:
            self._limit_time(conn)
            if self._capabilities.writable_ctes:
                values, sparse = self._probe(conn, task_type, classes, now, limit)
                values.update(order_values(now), **long_values(long_run))
                statement = prepared_candidates(
                    self.engine.dialect,
                    task_type,
                    classes,
                    _node_key(nodes),
                    sparse,
                    order,
                    short_only,
                )
                return [row[0] for row in statement.rows(conn, **values)]
            ids: list[int] = []
            for priority in classes:
                if len(ids) < limit:
                    ids.extend(
                        self._ordered_ids(
                            conn,
                            task_type,
                            priority,
                            now,
                            limit - len(ids),
                            nodes,
                            order,
                            short_only=short_only,
                            long_run=long_run,
                        )
                    )
            return ids

    def long_runs(
        self,
        task_type: str,
        *,
        now: datetime,
        within: timedelta,
        long_run: timedelta = LONG_RUN,
    ) -> LongRuns:
        check_aware("now", now)
        if within < timedelta(0):
            raise InvalidInput("within", f"{within} is negative")
        if long_run <= timedelta(0):
            raise InvalidInput("long_run", f"{long_run} is not positive")
        values = {"long_type": task_type, "long_soon": now + within, **long_values(long_run)}
        with self._read("count the long runs in flight") as conn:
            count, short_in_flight, *due = conn.execute(LONG_RUNS, values).one()
        return LongRuns(
            in_flight=int(count), short_due=any(due), short_in_flight=bool(short_in_flight)
        )

    def short_slack(
        self, task_type: str, *, now: datetime, floor: timedelta = LONG_RUN_FLOOR
    ) -> timedelta | None:
        check_aware("now", now)
        if floor < timedelta(0):
            raise InvalidInput("floor", f"{floor} is negative")
        values = {"long_type": task_type, "long_now": now, "long_floor": floor.total_seconds()}
        with self._read("read the slack a kept slot helps") as conn:
            found = [s for s in conn.execute(SHORT_SLACK, values).one() if s is not None]
        # (to the millisecond: SQLite's julianday arithmetic is a float's)
        return timedelta(seconds=round(min(found), 3)) if found else None

    def _refresh_statistics(self) -> None:
        """Analyse the task table first when the planner's statistics are
        missing or stale (PostgreSQL; outside a caller's transaction): the
        claim's plan depends on how many tasks the planner thinks are ready,
        and autovacuum may take a minute after a bulk creation. One claimer
        analyses (an advisory lock); the others wait for it rather than plan
        their claims blind (the array look-up of the sparse path then became
        a scan: 8-13 s statements with three runners at 50k), and analyse in
        turn only if the statistics are still stale once they hold the lock."""
        if not self._capabilities.writable_ctes or self._bound is not None:
            return
        with self._read("read the task table's statistics") as conn:
            row = conn.execute(_STALE_STATISTICS).first()
        if row is None or not row.stale:
            return
        with self._write("analyze tasks") as conn:
            self._maintenance(conn)
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_ANALYZE_LOCK)))
            row = conn.execute(_STALE_STATISTICS).first()
            if row is not None and row.stale:
                conn.execute(sa.text("ANALYZE task"))

    def _probe(
        self,
        conn: sa.Connection,
        task_type: str,
        classes: tuple[Priority, ...],
        now: datetime,
        limit: int,
    ) -> tuple[dict[str, Any], frozenset[Priority]]:
        """The parameters of a claim (or candidates read) of ``limit`` tasks,
        and the classes with few enough ready tasks to be read sparsely."""
        bound = limit * SPARSE_FACTOR
        values = {"claim_now": now, "claim_limit": limit, "claim_bound": bound}
        (counts,) = prepared_probe(self.engine.dialect, task_type, classes).rows(conn, **values)
        return values, frozenset(p for p, n in zip(classes, counts, strict=True) if n < bound)

    def _outside_blackouts(
        self, conn: sa.Connection, found: Sequence[Sequence[Any]], now: datetime
    ) -> list[Sequence[Any]]:
        """The claimed rows whose task is free to run at ``now``.

        A task inside one of its blackout windows (added after its next_run
        was computed, or begun while it waited for capacity) is put back:
        waiting, next_run at the window's end, and the run just created for
        it is deleted. Rows end with ``(backend_id, tz, blackouts)``."""
        if not any(row[-1] for row in found):  # the common case: no blackouts at all
            return list(found)
        kept: list[Sequence[Any]] = []
        for row in found:
            backend_id, tz, blackouts = row[-3:]
            periods = [BlackoutPeriod.parse(b) for b in blackouts or ()]
            if not periods or window_at(periods, tz, now) is None:
                kept.append(row)
                continue
            conn.execute(sa.delete(run_t).where(run_t.c.backend_id == backend_id))
            conn.execute(
                sa.update(task_t)
                .where(task_t.c.id == row[0])
                .values(
                    status=TaskStatus.WAITING.value,
                    next_run=leave_blackouts(periods, tz, now),
                    updated_at=now,
                )
            )
        return kept

    def _claim_class(
        self,
        conn: sa.Connection,
        task_type: str,
        priority: Priority,
        now: datetime,
        limit: int,
        nodes: Sequence[str] | None,
        among: Sequence[int] | None,
        batch: int,
        order: DispatchOrder = DispatchOrder.DEADLINE,
        short_only: bool = False,
        long_run: timedelta = LONG_RUN,
    ) -> list[Claimed]:
        """Mark up to ``limit`` ready tasks of one class scheduled: their ids
        in ``order``, then one ``UPDATE … RETURNING`` (the caller's write
        transaction holds SQLite's lock from its start)."""
        ids = self._ordered_ids(
            conn, task_type, priority, now, limit, nodes, order, among, short_only, long_run
        )
        if not ids:
            return []
        position = {task_id: i for i, task_id in enumerate(ids)}
        params = {"claimed_ids": ids, "claimed_at": now}
        found = sorted(conn.execute(_MARK_CLAIMED, params).all(), key=lambda r: position[r[0]])
        # the rows as the one-statement claim returns them (the runs are
        # inserted afterwards, for the tasks kept)
        namespace = self._run_namespace(conn)
        shaped = [(*r[:5], run_backend_id(r[0], r[1], namespace), *r[5:]) for r in found]
        return [
            _claim(task_id, slot, deadline, backend_id, arguments, banned, batch)
            for task_id, slot, deadline, arguments, banned, backend_id, *_ in (
                self._outside_blackouts(conn, shaped, now)
            )
        ]

    def _ordered_ids(
        self,
        conn: sa.Connection,
        task_type: str,
        priority: Priority,
        now: datetime,
        limit: int,
        nodes: Sequence[str] | None,
        order: DispatchOrder,
        among: Sequence[int] | None = None,
        short_only: bool = False,
        long_run: timedelta = LONG_RUN,
    ) -> list[int]:
        """The ids of up to ``limit`` ready tasks of one class, in ``order``
        (the keys of :func:`order_keys`, their parameters bound here)."""
        query = ordered_ids_statement(
            self.engine.dialect.name, priority, order, _node_key(nodes), short_only
        )
        if among is not None:
            query = query.where(task_t.c.id.in_(among))
        if self._capabilities.skip_locked:
            query = query.with_for_update(skip_locked=True)
        params = {
            "claim_type": task_type,
            "claim_now": now,
            "claim_limit": limit,
            **order_values(now),
            **long_values(long_run),
        }
        return list(conn.scalars(query, params))

    def _runnable_on(self, nodes: Sequence[str] | None) -> sa.ColumnElement[bool]:
        return runnable_on(self.engine.dialect.name, nodes)

    def _insert_runs(self, conn: sa.Connection, claimed: list[Claimed], now: datetime) -> None:
        """Create the ``scheduled`` runs of claimed tasks (caller's transaction)
        where the claim statement could not (no writable CTEs)."""
        if not claimed:
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
                    "batch_id": c.batch,
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
                backend_id=backend_id
                or run_backend_id(task_id, current.next_run, self._run_namespace(conn)),
                slot=current.next_run,
                scheduled=now,
            )
            [run_id] = self._insert(conn, run_t, [rows.run_to_row(run)])
            return replace(run, id=run_id)

    def get_task_run(self, backend_id: str) -> TaskRun | None:
        if unstorable(backend_id):  # no run has such an id (nor could the database compare it)
            return None
        with self._read("get task run") as conn:
            row = conn.execute(sa.select(run_t).where(run_t.c.backend_id == backend_id)).first()
        return rows.run_from_row(row._mapping) if row else None

    def get_task_runs(
        self,
        task_id: int,
        *,
        limit: int = 20,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[TaskRun]:
        if limit < 1:  # SQLite reads LIMIT -1 as no limit at all
            raise InvalidInput("limit", f"{limit} must be a positive number")
        query = (
            sa.select(run_t)
            .where(run_t.c.task_id == task_id)
            .order_by(run_t.c.scheduled.desc(), run_t.c.id.desc())
            .limit(limit)
        )
        if statuses is not None:
            query = query.where(run_t.c.status.in_([RunStatus(s).value for s in statuses]))
        with self._read("list task runs") as conn:
            return [rows.run_from_row(r._mapping) for r in conn.execute(query)]

    def count_task_runs(self, task_id: int) -> int:
        # the (task_id, slot) unique index serves it
        query = sa.select(sa.func.count()).select_from(run_t).where(run_t.c.task_id == task_id)
        with self._read("count task runs") as conn:
            return int(conn.scalar(query) or 0)

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
                # a disabled or cancelled task may still have a run going on
                ~sa.exists().where(run_t.c.task_id == task_t.c.id, run_t.c.status.in_(_OPEN)),
            )
            .limit(limit)
            .scalar_subquery()
        )
        with self._write("delete finished one-shot tasks") as conn:
            gone = list(
                conn.scalars(
                    sa.delete(task_t).where(task_t.c.id.in_(victims)).returning(task_t.c.id)
                )
            )
            conn.execute(sa.delete(cond_t).where(cond_t.c.task_id.in_(gone)))
            return len(gone)


#: outcomes that a worker reports (not the scheduler's own verdicts)
def dispatch_order(value: DispatchOrder | str) -> DispatchOrder:
    """``value`` as a :class:`DispatchOrder` (its name is accepted)."""
    try:
        return DispatchOrder(value)
    except ValueError:
        choices = ", ".join(o.value for o in DispatchOrder)
        raise InvalidInput("order", f"{value!r} is not a dispatch order ({choices})") from None


def _classes(priorities: Sequence[Priority] | None) -> tuple[Priority, ...]:
    """The classes to serve, in dispatch order."""
    wanted = set(priorities) if priorities else set(PRIORITY_ORDER)
    return tuple(p for p in PRIORITY_ORDER if p in wanted)


def _node_key(nodes: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if nodes is None else tuple(sorted(nodes))


def _claim(
    task_id: int,
    slot: datetime,
    deadline: datetime,
    backend_id: str,
    arguments: Mapping[str, Any] | str,
    banned: Sequence[str] | None,
    batch: int | None = None,
) -> Claimed:
    """A claim from stored columns (``arguments``: the task's JSON, decoded
    or as text)."""
    return Claimed(task_id, slot, deadline, backend_id, arguments, tuple(banned or ()), batch)


#: statistics are stale when never taken, or when more rows changed since
#: than a fifth of the table (plus a thousand: small tables stay quiet)
_STALE_STATISTICS = sa.text(
    """
SELECT c.reltuples < 0 OR coalesce(s.n_mod_since_analyze, 0) > 1000 + 0.2 * c.reltuples AS stale
FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = to_regclass('task')
"""
)
#: the advisory lock of the claimer that analyses the task table
_ANALYZE_LOCK = 0x5357_4854_0001


#: the tasks of a claim (without writable CTEs) marked scheduled, and what
#: their runs are made of (built once: the ids are one expanding parameter)
_MARK_CLAIMED = (
    sa.update(task_t)
    .where(task_t.c.id.in_(sa.bindparam("claimed_ids", expanding=True)))
    .values(
        status=TaskStatus.SCHEDULED.value,
        updated_at=sa.bindparam("claimed_at", type_=task_t.c.updated_at.type),
    )
    .returning(
        task_t.c.id,
        task_t.c.next_run,
        task_t.c.deadline,
        task_t.c.arguments,
        task_t.c.dont_run_on_nodes,
        task_t.c.tz,
        task_t.c.blackout_periods,
    )
)
