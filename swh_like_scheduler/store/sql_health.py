"""The store's schedule-health figures (``/health``, ``/metrics``): counts
and extremes read through indexes, never a task evaluated in Python."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput
from ..domain.model import Priority, RunStatus, TaskStatus
from ..domain.records import EXPIRED_ERROR
from .sql_base import SQLBase
from .tables import OPEN_RUN
from .tables import dispatch_batch as batch_t
from .tables import dispatch_room as room_t
from .tables import task as task_t
from .tables import task_run as run_t
from .tables import task_type as type_t
from .tables import worker as worker_t
from .values import ENDED_WINDOW, ScheduleHealth

_QUEUED_RUN = sa.text("task_run.status = 'scheduled'")
_IN_FLIGHT = sa.text("task.status = 'scheduled'")


class HealthMethods(SQLBase):
    """:meth:`SchedulerStore.schedule_health`."""

    def schedule_health(
        self,
        *,
        now: datetime,
        counts: bool = True,
        runs: bool = True,
        queued_upto: int | None = None,
    ) -> ScheduleHealth:
        if queued_upto is not None and queued_upto < 0:
            raise InvalidInput("queued_upto", "must not be negative")
        tasks = sa.select(task_t.c.type, task_t.c.status, sa.func.count()).group_by(
            task_t.c.type, task_t.c.status
        )
        open_runs = (
            sa.select(task_t.c.type, run_t.c.status, sa.func.count())
            .select_from(run_t)
            .join(task_t, task_t.c.id == run_t.c.task_id)
            .where(OPEN_RUN)  # written out: ix_task_run_open serves it, generic plan or not
            .group_by(task_t.c.type, run_t.c.status)
        )
        # runs ended within the window per type and status, and among them
        # the one-shot expiries: one read of the ended-run index
        is_expired = sa.and_(
            run_t.c.status == RunStatus.CANCELLED.value, run_t.c.error.startswith(EXPIRED_ERROR)
        )
        ended = (
            sa.select(
                task_t.c.type,
                run_t.c.status,
                sa.func.count(),
                sa.func.count(sa.case((is_expired, 1))),
            )
            .select_from(run_t)
            .join(task_t, task_t.c.id == run_t.c.task_id)
            .where(run_t.c.ended > now - ENDED_WINDOW, run_t.c.ended <= now)
            .group_by(task_t.c.type, run_t.c.status)
        )
        # a run dispatched within the window is open (by the open-run
        # index), or ended within it (by the ended-run index)
        since = now - ENDED_WINDOW
        per_type = (
            sa.select(task_t.c.type, sa.func.count())
            .select_from(run_t)
            .join(task_t, task_t.c.id == run_t.c.task_id)
            .group_by(task_t.c.type)
        )
        dispatched_open = per_type.where(OPEN_RUN, run_t.c.scheduled > since)
        dispatched_ended = per_type.where(
            run_t.c.ended > since, run_t.c.ended <= now, run_t.c.scheduled > since
        )
        # the instants, each the first entry of an index, in one statement
        instants = sa.select(
            # batch ids grow with time: the newest batch, by its key
            sa.select(batch_t.c.claimed_at)
            .order_by(batch_t.c.id.desc())
            .limit(1)
            .scalar_subquery(),
            sa.select(sa.func.max(worker_t.c.last_heartbeat_at)).scalar_subquery(),
            # the predicate of ix_task_run_open, written out: the index serves it
            sa.select(sa.func.min(run_t.c.scheduled)).where(OPEN_RUN).scalar_subquery(),
            sa.select(sa.func.max(room_t.c.at)).scalar_subquery(),
        )
        with self._read("read schedule health") as conn:
            if counts:
                self._maintenance(conn)  # counts over every task
            names = list(conn.scalars(sa.select(type_t.c.type).order_by(type_t.c.type)))
            overdue = _overdue(conn, names, now)
            dispatched: dict[str, int] = {}
            if runs:
                for query in (dispatched_open, dispatched_ended):
                    for name, count in conn.execute(query):
                        dispatched[name] = dispatched.get(name, 0) + count
            ended_runs: dict[tuple[str, str], int] = {}
            expired: dict[str, int] = {}
            for name, status, count, expiries in conn.execute(ended):
                ended_runs[(name, status)] = int(count)
                if expiries:
                    expired[name] = expired.get(name, 0) + int(expiries)
            claim, seen, oldest_open, room = conn.execute(instants).one()
            return ScheduleHealth(
                now=now,
                tasks={(t, s): n for t, s, n in conn.execute(tasks)} if counts else {},
                oldest_overdue=overdue,
                open_runs={(t, s): n for t, s, n in conn.execute(open_runs)} if runs else {},
                last_claim_at=claim,
                last_worker_seen_at=seen,
                ended_runs=ended_runs,
                expired=expired,
                oldest_open_run=oldest_open,
                last_room_at=room,
                dispatched=dispatched,
                queued={} if queued_upto == 0 else _queued(conn, names, queued_upto),
            )


def _overdue(conn: sa.Connection, names: list[str], now: datetime) -> dict[str, datetime]:
    """Per type with waiting tasks past their deadline, the earliest such
    deadline: per type and class, the first entry of the dispatch-order
    index, all in one statement."""
    firsts = [
        sa.select(
            sa.literal(name).label("type"),
            sa.select(sa.func.min(task_t.c.deadline))
            .where(
                task_t.c.type == name,
                task_t.c.priority == priority.value,
                task_t.c.status == TaskStatus.WAITING.value,
            )
            .scalar_subquery()
            .label("earliest"),
        )
        for name in names
        for priority in Priority
    ]
    if not firsts:
        return {}
    overdue: dict[str, datetime] = {}
    for name, earliest in conn.execute(sa.union_all(*firsts)):
        if earliest is not None and earliest < now:
            overdue[name] = min(earliest, overdue.get(name, earliest))
    return overdue


def _queued(
    conn: sa.Connection, names: list[str], upto: int | None
) -> dict[str, tuple[int, datetime]]:
    """Per type, the runs waiting in the broker (up to ``upto``) and the
    earliest should_start_by of their tasks: the type's dispatched tasks
    walked in deadline order (``ix_task_in_flight``), a page at a time,
    each asked whether its run has not started (``ix_task_run_queued``); a
    run already started is stepped over. Index reads in pages, never a join
    the planner could turn into a read of every open run."""
    found: dict[str, tuple[int, datetime]] = {}
    for name in names:
        count, earliest = 0, None
        after: tuple[datetime, int] | None = None
        while upto is None or count < upto:
            # a scalar subquery, not EXISTS: PostgreSQL may hash an EXISTS
            # over every queued run, never a subquery with a LIMIT
            waits = (
                sa.select(sa.literal(1))
                .where(run_t.c.task_id == task_t.c.id, _QUEUED_RUN)
                .limit(1)
                .correlate(task_t)
                .scalar_subquery()
                .label("waits")
            )
            page = (
                sa.select(task_t.c.id, task_t.c.deadline, waits)
                .where(task_t.c.type == name, _IN_FLIGHT)
                .order_by(task_t.c.deadline, task_t.c.id)
                .limit(_WALK_PAGE)
            )
            if after is not None:
                page = page.where(sa.tuple_(task_t.c.deadline, task_t.c.id) > sa.tuple_(*after))
            rows = conn.execute(page).all()
            if not rows:
                break
            for row in rows:
                if row.waits and (upto is None or count < upto):
                    count += 1
                    earliest = row.deadline if earliest is None else earliest
            after = (rows[-1].deadline, rows[-1].id)
            if len(rows) < _WALK_PAGE:
                break
        if count and earliest is not None:
            found[name] = (count, earliest)
    return found


#: dispatched tasks read per page by :func:`_queued`
_WALK_PAGE = 1000
