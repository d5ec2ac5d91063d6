"""Which tasks' runs are long runs, in SQL (:mod:`~..dispatch.reserve`),
and the dialects' arithmetic of instants and intervals it needs."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

from ..domain.enums import LONG_RUN
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


class LongRunSpan(sa.sql.functions.FunctionElement[timedelta]):
    """:data:`~..enums.LONG_RUN` written into the statement, in each
    dialect's form of a stored interval (a constant: compiled once into the
    prepared claims, with no parameter to convert)."""

    type = sa.Interval()
    name = "long_run_span"
    inherit_cache = True


@compiles(LongRunSpan, "postgresql")
def _long_run_postgresql(element: LongRunSpan, compiler: SQLCompiler, **kw: Any) -> str:
    return f"interval '{LONG_RUN.total_seconds():.6f} seconds'"


@compiles(LongRunSpan)
def _long_run_sqlite(element: LongRunSpan, compiler: SQLCompiler, **kw: Any) -> str:
    # (SQLAlchemy keeps an interval in SQLite as the instant that far past
    # the epoch, as text: compared as text, as the columns are)
    since_epoch = datetime(1970, 1, 1) + LONG_RUN
    return f"'{since_epoch.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


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
    :data:`~..enums.LONG_RUN` or more: its retry may hold a slot as long,
    whatever the average of the good runs says. Never NULL."""
    return sa.and_(
        task_t.c.failure_count > 0,
        task_t.c.last_start_at.is_not(None),
        task_t.c.last_end_at.is_not(None),
        Seconds(task_t.c.last_end_at, task_t.c.last_start_at) >= LONG_RUN.total_seconds(),
    )


def is_long() -> sa.ColumnElement[bool]:
    """Tasks whose runs are long runs (:data:`~..enums.LONG_RUN`): expected
    so (:func:`expected_run`), or whose last run failed that long
    (:func:`failed_long`); a task whose length is not known at all is not one."""
    return sa.or_(expected_run() >= LongRunSpan(), failed_long())


def is_short() -> sa.ColumnElement[bool]:
    """The other tasks: shorter, or of a length not known yet."""
    return sa.and_(
        sa.or_(expected_run().is_(None), expected_run() < LongRunSpan()), sa.not_(failed_long())
    )
