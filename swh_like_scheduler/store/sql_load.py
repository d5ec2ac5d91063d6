"""The monitor's measurement of each task type's load (``task_type.load_*``).

Per task type, over its live adaptive tasks, in three aggregate queries:

* **demand**: the worker-seconds per second they ask for at their current
  intervals, each task ``avg / (I + avg)`` (``avg``: its expected duration,
  else its average good duration; a task visited every ``I`` after its last
  end runs once per ``I + avg``). Tasks without a known duration count as
  the mean of those with one;
* **delivered**: the worker-seconds their runs took within the window
  ``[now - window, now]`` (the part of each run inside it, runs still going
  included), over the window's length;
* **backlog**: how many wait with a ``next_run`` more than ``slack`` before
  ``now`` (ready, not dispatched: the runner did not keep up, or their
  queue is full).

Durations are summed in the database: PostgreSQL's ``EXTRACT(EPOCH ...)``,
SQLite's ``julianday`` (SQLAlchemy keeps an interval there as the instant
that far after the epoch).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput
from ..domain.model import PRIORITY_ORDER, ScheduleKind, TaskStatus, TypeLoad
from .sql_base import SQLBase
from .tables import LIVE_STATUS, OPEN_RUN
from .tables import task as task_t
from .tables import task_run as run_t
from .tables import task_type as type_t

#: task types counted per read of the backlog
_TYPES_PER_READ = 50
#: a run going on, written out beside ``OPEN_RUN`` (which proves
#: ``ix_task_run_open``'s predicate)
_STARTED_RUN = sa.text("task_run.status = 'started'")
#: the Julian day of 1970-01-01T00:00:00 (SQLite's epoch for intervals)
_UNIX_EPOCH_JULIAN = 2440587.5


def demand_of(tasks: int, known: int, total: float) -> float:
    """A type's demand from its ``tasks`` live adaptive tasks, ``known`` of
    them with a known duration, whose shares sum to ``total``: the tasks
    without a known duration ask, on average, what the others do."""
    return total * tasks / known if known else 0.0


def check_load_settings(now: datetime, window: timedelta, slack: timedelta) -> None:
    """Refuse what no load measure can be taken with (naming the setting)."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInput("now", f"{now.isoformat()} has no time zone")
    if window <= timedelta(0):
        raise InvalidInput("load_window", f"{window} must be longer than zero")
    if slack < timedelta(0):
        raise InvalidInput("load_slack", f"{slack} is negative")


def between_seconds(dialect: str, start: Any, end: Any) -> Any:
    """The seconds from ``start`` to ``end`` (instants), in ``dialect``'s SQL."""
    if dialect == "postgresql":
        return sa.extract("epoch", end - start)
    return (sa.func.julianday(end) - sa.func.julianday(start)) * 86400.0


def delivered_query(dialect: str, now: datetime, window: timedelta) -> sa.Select[Any]:
    """Per type, the seconds its adaptive tasks' runs took within
    ``[now - window, now]``: the runs that ended in it, and the runs still
    going. Two reads, each on an index of its own (the ended runs by
    ``ix_task_run_ended``, the open ones by ``ix_task_run_open``), never a
    scan of every run the table keeps (an ``OR`` of the two was one)."""
    since = now - window
    start = sa.case(
        (run_t.c.started < since, sa.literal(since, run_t.c.started.type)),
        else_=run_t.c.started,
    )
    end = sa.func.coalesce(run_t.c.ended, sa.literal(now, run_t.c.ended.type))
    joined = run_t.join(task_t, task_t.c.id == run_t.c.task_id)
    adaptive = task_t.c.schedule_kind == ScheduleKind.ADAPTIVE.value
    started = (adaptive, run_t.c.started.is_not(None), run_t.c.started < now)
    parts = [
        sa.select(task_t.c.type.label("type"), between_seconds(dialect, start, end).label("busy"))
        .select_from(joined)
        .where(*started, *branch)
        for branch in (
            (run_t.c.ended > since, run_t.c.ended <= now),
            (run_t.c.ended.is_(None), OPEN_RUN, _STARTED_RUN),
        )
    ]
    runs = sa.union_all(*parts).subquery()
    total = sa.func.coalesce(sa.func.sum(runs.c.busy), 0.0)
    return sa.select(runs.c.type, total).group_by(runs.c.type)


class LoadMethods(SQLBase):
    """``measure_type_loads`` (the monitor's, :class:`MonitorStore`)."""

    def _interval_seconds(self, column: Any) -> Any:
        if self.engine.dialect.name == "postgresql":
            return sa.extract("epoch", column)
        return (sa.func.julianday(column) - _UNIX_EPOCH_JULIAN) * 86400.0

    def measure_type_loads(
        self, *, now: datetime, window: timedelta, slack: timedelta
    ) -> dict[str, TypeLoad]:
        check_load_settings(now, window, slack)
        adaptive = task_t.c.schedule_kind == ScheduleKind.ADAPTIVE.value
        with self._write("measure task type loads") as conn:
            self._maintenance(conn)  # reads every adaptive task
            names = list(conn.execute(sa.select(type_t.c.type)).scalars())
            demand = self._demand(conn, adaptive)
            delivered = self._delivered(conn, now, window)
            backlog = self._backlog(conn, names, adaptive, now - slack)
            loads = {
                name: TypeLoad(
                    demand=demand.get(name, 0.0),
                    delivered=delivered.get(name, 0.0),
                    backlog=int(backlog.get(name, 0)),
                    measured_at=now,
                )
                for name in names
            }
            if loads:
                conn.execute(
                    sa.update(type_t)
                    .where(type_t.c.type == sa.bindparam("name"))
                    .values(
                        load_demand=sa.bindparam("demand"),
                        load_delivered=sa.bindparam("delivered"),
                        load_backlog=sa.bindparam("backlog"),
                        load_measured_at=sa.bindparam("at", type_=type_t.c.load_measured_at.type),
                    ),
                    [
                        {
                            "name": name,
                            "demand": load.demand,
                            "delivered": load.delivered,
                            "backlog": load.backlog,
                            "at": now,
                        }
                        for name, load in loads.items()
                    ],
                )
        return loads

    def _demand_share(self) -> Any:
        """One task's demand, ``avg / (I + avg)`` (NULL without a known
        duration), over ``task`` joined to its ``task_type``."""
        avg = self._interval_seconds(
            sa.func.coalesce(task_t.c.expected_duration, task_t.c.average_good_duration)
        )
        interval = self._interval_seconds(
            sa.func.coalesce(task_t.c.current_interval, type_t.c.default_interval)
        )
        return avg / sa.func.nullif(interval + avg, 0)

    def _demand(self, conn: sa.Connection, adaptive: Any) -> dict[str, float]:
        """``{type: demand}`` over its live adaptive tasks (module docstring)."""
        share = self._demand_share()
        query = (
            sa.select(
                task_t.c.type,
                sa.func.count(),
                sa.func.count(share),
                sa.func.coalesce(sa.func.sum(share), 0.0),
            )
            .select_from(task_t.join(type_t, type_t.c.type == task_t.c.type))
            .where(adaptive, LIVE_STATUS)
            .group_by(task_t.c.type)
        )
        return {
            name: demand_of(tasks, known, float(total))
            for name, tasks, known, total in conn.execute(query)
        }

    def _backlog(
        self, conn: sa.Connection, names: list[str], adaptive: Any, before: datetime
    ) -> dict[str, int]:
        """Per type, its adaptive tasks waiting with a ``next_run`` before
        ``before``: one count per type and priority class, each a range of
        ``ix_task_ready`` (the tasks ready that long), never a scan of every
        waiting task."""
        backlog: dict[str, int] = {}
        for start in range(0, len(names), _TYPES_PER_READ):
            chunk = names[start : start + _TYPES_PER_READ]
            counts = [
                sa.select(sa.func.count())
                .where(
                    task_t.c.type == name,
                    task_t.c.priority == priority.value,
                    task_t.c.status == TaskStatus.WAITING.value,
                    task_t.c.next_run < before,
                    adaptive,
                )
                .scalar_subquery()
                for name in chunk
                for priority in PRIORITY_ORDER
            ]
            found = iter(conn.execute(sa.select(*counts)).one())
            for name in chunk:
                backlog[name] = sum(int(next(found)) for _ in PRIORITY_ORDER)
        return backlog

    def _delivered(self, conn: sa.Connection, now: datetime, window: timedelta) -> dict[str, float]:
        query = delivered_query(self.engine.dialect.name, now, window)
        seconds = window.total_seconds()
        return {name: max(0.0, float(total)) / seconds for name, total in conn.execute(query)}
