"""Claims, runs and retention: the dispatching half of the SQLAlchemy store."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

import sqlalchemy as sa

from ..exceptions import (
    InvalidInput,
    InvalidTransition,
    NotFound,
)
from ..model import (
    OPEN_RUN_STATUSES,
    PRIORITY_ORDER,
    BlackoutPeriod,
    Claimed,
    DispatchOrder,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    final_run_status,
    run_backend_id,
)
from ..policy import leave_blackouts, window_at
from ..records import LATE_OUTCOME, SUPERSEDED, WORKER_OFFLINE
from ..validation import unstorable
from . import rows
from .interface import ApplyOutcome, RunEnd
from .sql_batch import update_rows
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
from .sql_lease import _entry
from .tables import task as task_t
from .tables import task_run as run_t

_OPEN = [s.value for s in OPEN_RUN_STATUSES]
#: an outcome that makes its task ready again within this long wakes the
#: runners (PostgreSQL NOTIFY), which sleep up to a minute by default
ANNOUNCE_WITHIN = timedelta(minutes=1)
_FINISHED_TASK = [
    s.value for s in (TaskStatus.COMPLETED, TaskStatus.DISABLED, TaskStatus.CANCELLED)
]


class RunMethods(DispatchMethods):
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
                values.update(order_values(now))
                statement = prepared_claim(
                    self.engine.dialect,
                    task_type,
                    classes,
                    _node_key(nodes),
                    sparse,
                    among is not None,
                    order,
                )
                found = statement.rows(conn, claim_batch=batch, **values)
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
                values.update(order_values(now))
                statement = prepared_candidates(
                    self.engine.dialect, task_type, classes, _node_key(nodes), sparse, order
                )
                return [row[0] for row in statement.rows(conn, **values)]
            ids: list[int] = []
            for priority in classes:
                if len(ids) < limit:
                    ids.extend(
                        self._ordered_ids(
                            conn, task_type, priority, now, limit - len(ids), nodes, order
                        )
                    )
            return ids

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
    ) -> list[Claimed]:
        """Mark up to ``limit`` ready tasks of one class scheduled: their ids
        in ``order``, then one ``UPDATE … RETURNING`` (the caller's write
        transaction holds SQLite's lock from its start)."""
        ids = self._ordered_ids(conn, task_type, priority, now, limit, nodes, order, among)
        if not ids:
            return []
        position = {task_id: i for i, task_id in enumerate(ids)}
        statement = (
            sa.update(task_t)
            .where(task_t.c.id.in_(ids))
            .values(status=TaskStatus.SCHEDULED.value, updated_at=now)
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
        found = sorted(conn.execute(statement).all(), key=lambda r: position[r[0]])
        # the rows as the one-statement claim returns them (the runs are
        # inserted afterwards, for the tasks kept)
        shaped = [(*r[:5], run_backend_id(r[0], r[1]), *r[5:]) for r in found]
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
    ) -> list[int]:
        """The ids of up to ``limit`` ready tasks of one class, in ``order``
        (the keys of :func:`order_keys`, their parameters bound here)."""
        query = ordered_ids_statement(self.engine.dialect.name, priority, order, _node_key(nodes))
        if among is not None:
            query = query.where(task_t.c.id.in_(among))
        if self._capabilities.skip_locked:
            query = query.with_for_update(skip_locked=True)
        params = {
            "claim_type": task_type,
            "claim_now": now,
            "claim_limit": limit,
            **order_values(now),
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
                backend_id=backend_id or run_backend_id(task_id, current.next_run),
                slot=current.next_run,
                scheduled=now,
            )
            [run_id] = self._insert(conn, run_t, [rows.run_to_row(run)])
            return replace(run, id=run_id)

    def start_task_run(
        self, backend_id: str, *, started: datetime, worker: str | None = None
    ) -> TaskRun | None:
        return self.start_task_runs([(backend_id, started, worker)]).get(backend_id)

    def start_task_runs(
        self, starts: Sequence[tuple[str, datetime, str | None]]
    ) -> dict[str, TaskRun]:
        first: dict[str, tuple[datetime, str | None]] = {}
        for backend_id, started, worker in starts:
            first.setdefault(backend_id, (started, worker))
        if not first:
            return {}
        values = [
            {"backend_id": b, "status": RunStatus.STARTED.value, "started": s, "worker": w}
            for b, (s, w) in first.items()
        ]
        with self._write("start task runs") as conn:
            # only a run still scheduled changes: the same guard as one start
            update_rows(
                conn,
                run_t,
                "backend_id",
                values,
                ("status", "started", "worker"),
                single=_START_SCHEDULED_RUN,
                where={"status": RunStatus.SCHEDULED.value},
            )
            found = conn.execute(sa.select(run_t).where(run_t.c.backend_id.in_(list(first))))
            return {r.backend_id: rows.run_from_row(r._mapping) for r in found}

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
        end = RunEnd(backend_id, status, ended, result, error)
        return self.end_task_runs([end], apply=apply)[0]

    def end_task_runs(
        self, ends: Sequence[RunEnd], *, apply: ApplyOutcome | None = None
    ) -> list[TaskRun | None]:
        statuses = [final_run_status(end.status) for end in ends]  # all checked first
        if not ends:
            return []
        wanted = list(dict.fromkeys(end.backend_id for end in ends))
        with self._write("end task runs") as conn:
            query = sa.select(run_t).where(run_t.c.backend_id.in_(wanted)).order_by(run_t.c.id)
            runs = {
                row.backend_id: rows.run_from_row(row._mapping)
                for row in conn.execute(self._lock(query))
            }
            results: list[TaskRun | None] = []
            ended: list[TaskRun] = []
            for end, status in zip(ends, statuses, strict=True):
                run = runs.get(end.backend_id)
                if run is not None and _replaces_loss(run, status):
                    run = runs[end.backend_id] = self._replace_loss(conn, run, end, status, apply)
                elif run is not None and run.status.is_open:
                    run = replace(
                        run,
                        status=status,
                        ended=end.ended,
                        result=end.result,
                        error=end.error,
                        # a good end is the whole of the work, whatever was reported
                        progress=1.0 if status.is_good else run.progress,
                    )
                    runs[end.backend_id] = run
                    ended.append(run)
                results.append(run)
            if ended:
                update_rows(
                    conn,
                    run_t,
                    "id",
                    [
                        {
                            "id": run.id,
                            "status": run.status.value,
                            "ended": run.ended,
                            "result": run.result,
                            "error": run.error,
                            "progress": run.progress,
                        }
                        for run in ended
                    ],
                    ("status", "ended", "result", "error", "progress"),
                    single=_END_RUN,
                )
            if ended and apply is not None:
                self._apply_ends(conn, ended, apply)
        return results

    def _apply_ends(self, conn: sa.Connection, ended: list[TaskRun], apply: ApplyOutcome) -> None:
        """The tasks of ``ended`` runs, locked, through ``apply`` in order."""
        ids = sorted({run.task_id for run in ended})
        query = sa.select(task_t).where(task_t.c.id.in_(ids)).order_by(task_t.c.id)
        tasks = {
            row.id: rows.task_from_row(row._mapping) for row in conn.execute(self._lock(query))
        }
        before = {tid: rows.task_to_row(task) for tid, task in tasks.items()}
        changed: dict[int, Task] = {}
        for run in ended:
            task = tasks.get(run.task_id)
            if task is not None:
                assert run.ended is not None
                task = tasks[run.task_id] = replace(apply(task, run), updated_at=run.ended)
                changed[run.task_id] = task
        if changed:
            after = {tid: rows.task_to_row(task) for tid, task in changed.items()}
            # only the columns an outcome changed (the rows are locked: the
            # others are as read), never the arguments nor the definition
            columns = sorted(
                {
                    name
                    for tid, row in after.items()
                    for name in row
                    if row[name] != before[tid][name]
                }
            )
            update_rows(conn, task_t, "id", list(after.values()), columns, single=UPDATE_TASK)
            # a runner asleep for longer than this task's new wait is woken
            # to sleep until then instead (a short-interval task stays fresh)
            soon = max(run.ended for run in ended if run.ended is not None) + ANNOUNCE_WITHIN
            self._announce(
                conn,
                (
                    task.type
                    for task in changed.values()
                    if task.status is TaskStatus.WAITING and task.next_run <= soon
                ),
            )

    def _replace_loss(
        self,
        conn: sa.Connection,
        run: TaskRun,
        end: RunEnd,
        status: RunStatus,
        apply: ApplyOutcome | None,
    ) -> TaskRun:
        """The real outcome of ``run``, ended ``lost`` when its worker went
        away, arrived after all: it replaces ``lost``. When the task has no
        run going on, the outcome is applied to it (its schedule recomputed);
        a run dispatched meanwhile and not started is ended ``cancelled``
        (superseded), so that the start guard refuses its copy. A run
        already started is left to finish, and the task to its outcome."""
        entry = _entry(LATE_OUTCOME, end.ended, replaced=str(run.status), status=str(status))
        run = replace(
            run,
            status=status,
            ended=end.ended,
            result=end.result,
            error=end.error,
            progress=1.0 if status.is_good else run.progress,
            history=(*run.history, entry),
        )
        conn.execute(
            sa.update(run_t)
            .where(run_t.c.id == run.id)
            .values(
                status=run.status.value,
                ended=run.ended,
                result=run.result,
                error=run.error,
                progress=run.progress,
                history=[dict(h) for h in run.history],
            )
        )
        row = conn.execute(self._lock(sa.select(task_t).where(task_t.c.id == run.task_id))).first()
        if row is None or apply is None:
            return run
        task = rows.task_from_row(row._mapping)
        query = sa.select(run_t).where(run_t.c.task_id == task.id, run_t.c.status.in_(_OPEN))
        going_on = [rows.run_from_row(r._mapping) for r in conn.execute(self._lock(query))]
        if task.owner_tag is not None or any(r.status is RunStatus.STARTED for r in going_on):
            return run
        for other in going_on:
            superseded = _entry(SUPERSEDED, end.ended, by=run.backend_id)
            conn.execute(
                sa.update(run_t)
                .where(run_t.c.id == other.id)
                .values(
                    status=RunStatus.CANCELLED.value,
                    ended=max(end.ended, other.scheduled),
                    error=f"superseded: the real outcome of run {run.backend_id} arrived late",
                    history=[*(dict(h) for h in other.history), superseded],
                )
            )
        assert run.ended is not None
        after = replace(apply(task, run), updated_at=run.ended)
        conn.execute(UPDATE_TASK, [{**rows.task_to_row(after), "id_": task.id}])
        return run

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
            return conn.execute(sa.delete(task_t).where(task_t.c.id.in_(victims))).rowcount


#: outcomes that a worker reports (not the scheduler's own verdicts)
_REAL_OUTCOMES = frozenset(
    {
        RunStatus.EVENTFUL,
        RunStatus.UNEVENTFUL,
        RunStatus.FAILED,
        RunStatus.PERMFAILED,
        RunStatus.TIMED_OUT,
    }
)


def _replaces_loss(run: TaskRun, status: RunStatus) -> bool:
    """Whether an end with ``status`` is the real outcome of ``run``, which
    was ended ``lost`` because its worker went offline (not a stolen or
    yielded lease: their bodies were stopped, their late events are not
    outcomes)."""
    return (
        run.status is RunStatus.LOST
        and status in _REAL_OUTCOMES
        and bool(run.history)
        and run.history[-1].get("event") == WORKER_OFFLINE
    )


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


# Statements built once: SQLAlchemy caches their compiled form, which matters
# on the listener's path (a few thousand run ends a second).
def _bind(table: sa.Table, name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=table.c[name].type)


_START_SCHEDULED_RUN = (
    sa.update(run_t)
    .where(
        run_t.c.backend_id == sa.bindparam("backend_id_"),
        run_t.c.status == RunStatus.SCHEDULED.value,
    )
    .values({name: _bind(run_t, name) for name in ("status", "started", "worker")})
)
_END_RUN = (
    sa.update(run_t)
    .where(run_t.c.id == sa.bindparam("id_"))
    .values(
        {name: _bind(run_t, name) for name in ("status", "ended", "result", "error", "progress")}
    )
)
#: every column of a task but its id, from ``rows.task_to_row`` values
UPDATE_TASK = (
    sa.update(task_t)
    .where(task_t.c.id == sa.bindparam("id_"))
    .values({c.name: _bind(task_t, c.name) for c in task_t.c if c.name != "id"})
)
