"""Runs starting and ending: the start and end of runs as workers and the
listener report them, applied in batches (the outcome policy decides the
task's next times). Part of :class:`.sql_runs.RunMethods`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa

from ..domain.fencing import LEASE_LOST, LEASE_LOST_ERROR
from ..domain.model import OPEN_RUN_STATUSES, RunStatus, Task, TaskRun, TaskStatus, final_run_status
from ..domain.records import LATE_OUTCOME, STALE_END, STOLEN, SUPERSEDED, WORKER_OFFLINE
from . import rows
from .interface import ApplyOutcome, RunEnd
from .sql_base import SQLBase
from .sql_batch import among, update_rows
from .sql_lease import _entry
from .tables import task as task_t
from .tables import task_run as run_t

if TYPE_CHECKING:
    from .sql_lease import LeaseMethods

_OPEN = [s.value for s in OPEN_RUN_STATUSES]
#: an outcome that makes its task ready again within this long wakes the
#: runners (PostgreSQL NOTIFY), which sleep up to a minute by default
ANNOUNCE_WITHIN = timedelta(minutes=1)


class RunEndMethods(SQLBase):
    """Runs starting and ending (see the module doc)."""

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
            # only a run still scheduled changes: the same guard as one start;
            # never started before it was dispatched (a worker's clock behind
            # the database's, before the listener has measured it)
            update_rows(
                conn,
                run_t,
                "backend_id",
                values,
                ("status", "started", "worker"),
                single=_START_SCHEDULED_RUN,
                where={"status": RunStatus.SCHEDULED.value},
                at_least={"started": "scheduled"},
            )
            found = conn.execute(
                sa.select(run_t).where(among(conn, run_t.c.backend_id, list(first)))
            )
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
            query = (
                sa.select(run_t).where(among(conn, run_t.c.backend_id, wanted)).order_by(run_t.c.id)
            )
            runs = {
                row.backend_id: rows.run_from_row(row._mapping)
                for row in conn.execute(self._lock(query))
            }
            results: list[TaskRun | None] = []
            ended: list[TaskRun] = []
            for end, status in zip(ends, statuses, strict=True):
                run = runs.get(end.backend_id)
                if run is not None and run.status is RunStatus.LOST and status in _REAL_OUTCOMES:
                    run = runs[end.backend_id] = self._late_end(conn, run, end, status, apply)
                elif run is not None and run.status.is_open and _gave_up(status, end):
                    run = runs[end.backend_id] = self._given_up(conn, run, end, apply)
                elif run is not None and run.status.is_open:
                    # never ended before it started (or was dispatched): a
                    # worker's clock behind, not yet measured
                    floor = run.started or run.scheduled
                    end = replace(end, ended=max(end.ended, floor)) if floor else end
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
        query = sa.select(task_t).where(among(conn, task_t.c.id, ids)).order_by(task_t.c.id)
        tasks = {
            row.id: rows.task_from_row(row._mapping) for row in conn.execute(self._lock(query))
        }
        read = dict(tasks)
        changed: dict[int, Task] = {}
        for run in ended:
            task = tasks.get(run.task_id)
            if task is not None:
                assert run.ended is not None
                task = tasks[run.task_id] = apply(task, run).updated(updated_at=run.ended)
                changed[run.task_id] = task
        if changed:
            # only the columns an outcome changed (the rows are locked: the
            # others are as read), never the arguments nor the definition
            columns = tuple(
                sorted(
                    set().union(
                        *(rows.task_columns_changed(read[tid], t) for tid, t in changed.items())
                    )
                )
            )
            after = [
                {"id": tid, **rows.task_values(task, columns)} for tid, task in changed.items()
            ]
            # PostgreSQL: one statement setting ``columns``; elsewhere one
            # update per task, of those columns only (an index none of them
            # is in is left alone)
            if columns:
                single = update_task_columns(columns)
                update_rows(conn, task_t, "id", after, columns, single=single)
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

    def _late_end(
        self,
        conn: sa.Connection,
        run: TaskRun,
        end: RunEnd,
        status: RunStatus,
        apply: ApplyOutcome | None,
    ) -> TaskRun:
        """The outcome of ``run``, ended ``lost``, arrived after all (its body
        went on: its worker was taken for gone, or the process running it
        went silent and the run was taken from it). When another run of the
        task started since, or the task's fencing token moved on past the
        run's (taking a run moves it at once), the end is stale: the run
        ends ``superseded``, its result kept, the task untouched.
        Otherwise (a run no start guard took: no token), when the loss was
        a guess (worker offline, run taken away), the outcome replaces
        ``lost`` (:meth:`_replace_loss`); a body stopped because its run was
        taken (``RunTaken``, ``LeaseLost``, the lease's ``LeaseStopped``) or
        that yielded reports no outcome: the run stays ``lost`` and the copy
        dispatched since goes on."""
        last = run.history[-1].get("event") if run.history else None
        if last == LEASE_LOST and _gave_up(status, end):
            return run  # the copy's own stop again (a duplicate event)
        task_row = conn.execute(
            self._lock(sa.select(task_t.c.id, task_t.c.fence).where(task_t.c.id == run.task_id))
        ).first()
        later = conn.execute(
            sa.select(run_t.c.backend_id, run_t.c.fence, run_t.c.started)
            .where(
                run_t.c.task_id == run.task_id,
                run_t.c.id > (run.id or 0),
                run_t.c.started.is_not(None),
            )
            .order_by(run_t.c.id.desc())
            .limit(1)
        ).first()
        if task_row is not None and later is not None:
            return self._supersede(conn, run, end, status, later.backend_id, later.fence)
        if task_row is not None and run.fence is not None and int(task_row.fence) > run.fence:
            return self._supersede(conn, run, end, status, None, int(task_row.fence))
        if last not in (WORKER_OFFLINE, STOLEN) or (
            status is RunStatus.FAILED and any(stop in (end.error or "") for stop in _TAKEN_STOPS)
        ):
            return run
        return self._replace_loss(conn, run, end, status, apply)

    def _supersede(
        self,
        conn: sa.Connection,
        run: TaskRun,
        end: RunEnd,
        status: RunStatus,
        by: str | None,
        by_fence: int | None,
    ) -> TaskRun:
        """``run`` ends ``superseded``: ``by`` (the run started since, if
        any) and ``by_fence`` (its token, or the task's token that moved
        past the run's when the run was taken) are in the ``stale_end``
        entry."""
        entry = _entry(
            STALE_END, end.ended, status=str(status), fence=run.fence, by=by, by_fence=by_fence
        )
        run = replace(
            run,
            status=RunStatus.SUPERSEDED,
            ended=end.ended,
            result=end.result,
            error=end.error,
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
                history=[dict(h) for h in run.history],
            )
        )
        return run

    def _replace_loss(
        self,
        conn: sa.Connection,
        run: TaskRun,
        end: RunEnd,
        status: RunStatus,
        apply: ApplyOutcome | None,
    ) -> TaskRun:
        """The real outcome of ``run``, ended ``lost`` when its worker went
        away or its copy went silent, arrived after all, and no other run of
        the task started since: it replaces ``lost``, and the outcome is
        applied to the task (its schedule recomputed); a run dispatched
        meanwhile and not started is ended ``cancelled`` (superseded), so
        that the start guard refuses its copy."""
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

    def _given_up(
        self, conn: sa.Connection, run: TaskRun, end: RunEnd, apply: ApplyOutcome | None
    ) -> TaskRun:
        """The copy of the open ``run`` fenced itself (its process could not
        renew the run within its bound: ``LeaseLost``) and its body
        stopped: no outcome of the task. The run ends ``lost`` as when the
        monitor takes it (history ``lease_lost``, the ownership released,
        the fencing token moved on, the task runnable at once)."""
        lease = cast("LeaseMethods", self)
        entry = _entry(LEASE_LOST, end.ended, worker=run.worker, progress=run.progress)
        ended = lease._end_owned(
            conn,
            run,
            status=RunStatus.LOST,
            now=end.ended,
            error=f"given up by its copy: {end.error}",
            entry=entry,
            apply=apply,
            runnable_now=True,
            take=True,
        )
        return ended if ended is not None else run


def _gave_up(status: RunStatus, end: RunEnd) -> bool:
    """Whether ``end`` is the stop of a copy that fenced itself: a failure
    whose error is the repr of a ``LeaseLost`` (Celery's ``task-failed``,
    the result backend's, the worker's own)."""
    return status is RunStatus.FAILED and (end.error or "").startswith(f"{LEASE_LOST_ERROR}(")


#: what a body stopped because its run was taken raises (the heartbeat's,
#: a copy that fenced itself, the lease's): its failure is no outcome of the task
_TAKEN_STOPS = ("RunTaken", LEASE_LOST_ERROR, "LeaseStopped")

_REAL_OUTCOMES = frozenset(
    {
        RunStatus.EVENTFUL,
        RunStatus.UNEVENTFUL,
        RunStatus.FAILED,
        RunStatus.PERMFAILED,
        RunStatus.TIMED_OUT,
    }
)


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
    .values(
        status=_bind(run_t, "status"),
        worker=_bind(run_t, "worker"),
        # never before its dispatch (as GREATEST does on PostgreSQL)
        started=sa.case(
            (_bind(run_t, "started") < run_t.c.scheduled, run_t.c.scheduled),
            else_=_bind(run_t, "started"),
        ),
    )
)
_END_RUN = (
    sa.update(run_t)
    .where(run_t.c.id == sa.bindparam("id_"))
    .values(
        {name: _bind(run_t, name) for name in ("status", "ended", "result", "error", "progress")}
    )
)
#: every column of a task but its id and its fencing counter (only the
#: start guard raises it), from ``rows.task_to_row`` values
UPDATE_TASK = (
    sa.update(task_t)
    .where(task_t.c.id == sa.bindparam("id_"))
    .values({c.name: _bind(task_t, c.name) for c in task_t.c if c.name not in ("id", "fence")})
)


@lru_cache(maxsize=128)
def update_task_columns(columns: tuple[str, ...]) -> sa.Update:
    """An update of one task (bound ``id_``) setting ``columns`` from the
    parameters of the same names: built once per set of columns (an
    outcome changes one of a few sets)."""
    return (
        sa.update(task_t)
        .where(task_t.c.id == sa.bindparam("id_"))
        .values({name: _bind(task_t, name) for name in columns})
    )
