"""Which tasks' runs are long runs, in SQL (:mod:`~..dispatch.reserve`),
and the dialects' arithmetic of instants and intervals it needs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

from ..domain.enums import PRIORITY_ORDER, TaskStatus
from .tables import UTCDateTime
from .tables import task as task_t
from .tables import task_type as type_t


class Seconds(sa.sql.functions.FunctionElement[float]):
    """``Seconds(a, b)``: the seconds from instant ``b`` to instant ``a``
    (a float), in each dialect's own arithmetic."""

    type = sa.Float()
    name = "seconds_between"
    inherit_cache = True


@compiles(Seconds, "postgresql")
def _seconds_postgresql(element: Seconds, compiler: SQLCompiler, **kw: Any) -> str:
    a, b = (compiler.process(c, **kw) for c in element.clauses)
    return f"EXTRACT(EPOCH FROM ({a} - {b}))"


@compiles(Seconds)
def _seconds_sqlite(element: Seconds, compiler: SQLCompiler, **kw: Any) -> str:
    # (UTC text with microseconds: julianday reads it, in days)
    a, b = (compiler.process(c, **kw) for c in element.clauses)
    return f"((julianday({a}) - julianday({b})) * 86400.0)"


class IntervalSeconds(sa.sql.functions.FunctionElement[float]):
    """``IntervalSeconds(x)``: the seconds of a stored interval (a float),
    in each dialect's own arithmetic."""

    type = sa.Float()
    name = "interval_seconds"
    inherit_cache = True


@compiles(IntervalSeconds, "postgresql")
def _interval_postgresql(element: IntervalSeconds, compiler: SQLCompiler, **kw: Any) -> str:
    (x,) = (compiler.process(c, **kw) for c in element.clauses)
    return f"EXTRACT(EPOCH FROM {x})"


@compiles(IntervalSeconds)
def _interval_sqlite(element: IntervalSeconds, compiler: SQLCompiler, **kw: Any) -> str:
    # (SQLAlchemy keeps an interval in SQLite as the instant that far past
    # the epoch, as text; the epoch is Julian day 2440587.5)
    (x,) = (compiler.process(c, **kw) for c in element.clauses)
    return f"((julianday({x}) - 2440587.5) * 86400.0)"


#: What is long in a claim or a count (:mod:`~..dispatch.reserve`): a run
#: expected to last this long or more, given at each run of a statement
LONG_SPAN = sa.bindparam("claim_long_span", type_=sa.Interval())
#: the same, in seconds (the length of a failed run, computed)
LONG_SECONDS = sa.bindparam("claim_long_seconds", type_=sa.Float())


def long_values(long_run: timedelta) -> dict[str, Any]:
    """The values of :data:`LONG_SPAN` and :data:`LONG_SECONDS`."""
    return {"claim_long_span": long_run, "claim_long_seconds": long_run.total_seconds()}


def expected_run() -> sa.ColumnElement[Any]:
    """How long a task's run is expected to last: its average good run,
    else its ``expected_duration``, else its ``max_expected_duration``,
    else its type's; NULL when none is known."""
    type_expected = (
        sa.select(type_t.c.max_expected_duration)
        .where(type_t.c.type == task_t.c.type)
        .scalar_subquery()
    )
    return sa.func.coalesce(
        task_t.c.average_good_duration,
        task_t.c.expected_duration,
        task_t.c.max_expected_duration,
        type_expected,
    )


def failed_long() -> sa.ColumnElement[bool]:
    """Tasks whose last run failed (a timeout, say) after lasting
    :data:`LONG_SECONDS` or more: its retry may hold a slot as long,
    whatever the average of the good runs says. Never NULL."""
    return sa.and_(
        task_t.c.failure_count > 0,
        task_t.c.last_start_at.is_not(None),
        task_t.c.last_end_at.is_not(None),
        Seconds(task_t.c.last_end_at, task_t.c.last_start_at) >= LONG_SECONDS,
    )


def is_long() -> sa.ColumnElement[bool]:
    """Tasks whose runs are long runs (:data:`LONG_SPAN` or more): expected
    so (:func:`expected_run`), or whose last run failed that long
    (:func:`failed_long`); a task whose length is not known at all is not one."""
    return sa.or_(expected_run() >= LONG_SPAN, failed_long())


def is_short() -> sa.ColumnElement[bool]:
    """The other tasks: shorter, or of a length not known yet."""
    return sa.and_(
        sa.or_(expected_run().is_(None), expected_run() < LONG_SPAN), sa.not_(failed_long())
    )


def slack(now: sa.ColumnElement[Any]) -> sa.ColumnElement[float]:
    """How long (seconds) a waiting task may yet wait for a slot at
    ``now``: the time left to its deadline (negative once overdue)."""
    return Seconds(task_t.c.deadline, now)


def helpable(now: sa.ColumnElement[Any], floor: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
    """Tasks a slot kept free at ``now`` can still help: those whose
    expected run (:func:`expected_run`; unknown: none) is shorter than their
    :func:`slack`, or than ``floor`` (seconds) when that is less. A two-hour
    dump due in ten minutes is not one: it cannot make its deadline whatever
    is kept; an overdue ping is."""
    room = sa.case((slack(now) > floor, slack(now)), else_=floor)
    return sa.or_(expected_run().is_(None), IntervalSeconds(expected_run()) < room)


def long_runs_statement() -> sa.Select[Any]:
    """One row: the tasks of type ``long_type`` with a long run open
    (:data:`LONG_SPAN` or more), then whether a task of it that is not a long
    run is dispatched or running, then per class whether one is waiting
    with a next_run no later than ``long_soon`` (a range of
    ``ix_task_in_flight`` or ``ix_task_ready`` per class, each stopping at
    its first match). Built once."""
    kind = sa.bindparam("long_type", type_=sa.Text)
    soon = sa.bindparam("long_soon", type_=UTCDateTime)
    in_flight = (
        sa.select(sa.func.count())
        .select_from(task_t)
        .where(task_t.c.type == kind, task_t.c.status == TaskStatus.SCHEDULED.value, is_long())
        .scalar_subquery()
    )
    short_in_flight = sa.exists().where(
        task_t.c.type == kind, task_t.c.status == TaskStatus.SCHEDULED.value, is_short()
    )
    short_due = [
        sa.exists().where(
            task_t.c.type == kind,
            task_t.c.status == TaskStatus.WAITING.value,
            task_t.c.priority == priority.value,
            task_t.c.next_run <= soon,
            is_short(),
        )
        for priority in PRIORITY_ORDER
    ]
    return sa.select(in_flight, short_in_flight, *short_due)


def short_slack_statement() -> sa.Select[Any]:
    """One row: per class, the :func:`slack` (seconds) at ``long_now`` of
    the task of type ``long_type`` waiting with the earliest deadline that
    a kept slot can help (:func:`helpable`, ``long_floor`` seconds at
    least), or NULL (one walk of ``ix_task_dispatch_order`` per class,
    stopping at its first match). Built once."""
    kind = sa.bindparam("long_type", type_=sa.Text)
    now = sa.bindparam("long_now", type_=UTCDateTime)
    floor = sa.bindparam("long_floor", type_=sa.Float)
    earliest = [
        sa.select(slack(now))
        .where(
            task_t.c.type == kind,
            task_t.c.status == TaskStatus.WAITING.value,
            task_t.c.priority == priority.value,
            helpable(now, floor),
        )
        .order_by(task_t.c.deadline)
        .limit(1)
        .scalar_subquery()
        for priority in PRIORITY_ORDER
    ]
    return sa.select(*earliest)


#: built once
LONG_RUNS = long_runs_statement()
SHORT_SLACK = short_slack_statement()
