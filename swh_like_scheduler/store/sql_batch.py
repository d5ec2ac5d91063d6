"""Many rows of one table updated by one PostgreSQL statement.

The listener ends (and starts) runs a batch at a time; sent as a driver
``executemany``, each row is a statement of its own (pipelined, but parsed,
planned and executed once per row, and counted so by
``pg_stat_statements``). On PostgreSQL, :func:`update_rows` sends the whole
batch as **one** statement instead::

    UPDATE task_run SET status = v.status, ended = v.ended, …
    FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS v(id bigint, status text, …)
    WHERE task_run.id = v.id

The rows travel as one JSON parameter, so the statement's text depends only
on the columns set, never on the number of rows (the driver prepares it
once). Values are written in JSON exactly: timestamps in ISO 8601 with their
offset and microseconds, intervals as days, seconds and microseconds, JSON
columns as themselves. Rows are sent sorted by key, so concurrent batches
lock the rows they share in the same order. SQLite keeps the
``executemany`` of a prepared single-row statement (its write transaction
already excludes every other writer).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ..domain.exceptions import InvalidInput

#: rows per statement (one JSON parameter; the listener's batches are smaller)
CHUNK = 5_000


def _sql_type(column: sa.Column[Any]) -> str:
    """The PostgreSQL type a column's JSON value is read as."""
    kind = column.type
    if isinstance(kind, sa.Interval):  # (a TypeDecorator of DateTime where not native)
        return "interval"
    if isinstance(kind, sa.TypeDecorator):
        kind = kind.impl_instance
    if isinstance(kind, sa.DateTime):
        return "timestamptz"
    if isinstance(kind, sa.JSON):
        return "jsonb"
    if isinstance(kind, sa.Boolean):
        return "boolean"
    if isinstance(kind, sa.Integer):  # BigInteger too
        return "bigint"
    if isinstance(kind, sa.Float):
        return "float8"
    if isinstance(kind, sa.String):  # Text too
        return "text"
    raise TypeError(f"no batch form for column {column.name} of type {column.type!r}")


#: values written in JSON as they are (exactly these types, not subclasses)
_AS_THEY_ARE = frozenset({str, int, bool})


def _value(name: str, column_type: str, value: Any) -> Any:
    """``value`` as the JSON that PostgreSQL reads back as the same value."""
    if value is None or column_type == "jsonb" or type(value) in _AS_THEY_ARE:
        return value
    if isinstance(value, datetime):
        if value.tzinfo is UTC:  # (how the store reads and the policy writes them)
            return value.isoformat()
        if value.tzinfo is None:
            raise InvalidInput(
                name, f"naive datetime {value!r} given where an aware one is required"
            )
        return value.astimezone(UTC).isoformat()
    if isinstance(value, timedelta):
        return f"{value.days} days {value.seconds} seconds {value.microseconds} microseconds"
    if isinstance(value, float) and not math.isfinite(value):  # not JSON numbers
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _read(name: str, column_type: str) -> str:
    """The value a row sets: a JSON column's ``None`` stays the JSON ``null``
    that SQLAlchemy's JSON type writes (``jsonb_to_recordset`` reads a JSON
    null as SQL NULL)."""
    if column_type == "jsonb":
        return f"coalesce(v.\"{name}\", 'null'::jsonb)"
    return f'v."{name}"'


def among(
    conn: sa.Connection, column: sa.Column[Any], values: Sequence[Any]
) -> sa.ColumnElement[bool]:
    """``column`` is one of ``values``. On PostgreSQL one array parameter
    (``column = ANY(:values)``): the statement's text does not change with
    the number of values, so SQLAlchemy compiles it once and the driver
    prepares it once (``IN (…)`` is rendered anew for every length). Elsewhere
    ``IN (…)``."""
    if conn.dialect.name != "postgresql":
        return column.in_(list(values))
    name = f"among_{column.name}"
    array = sa.bindparam(name, list(values), type_=postgresql.ARRAY(column.type))
    return column == sa.any_(array)


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def update_rows(
    conn: sa.Connection,
    table: sa.Table,
    key: str,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    single: sa.Update,
    where: Mapping[str, Any] | None = None,
    at_least: Mapping[str, str] | None = None,
) -> int:
    """Set ``columns`` of the rows of ``table`` whose ``key`` column matches,
    from ``rows`` (each holds ``key`` and every column), where also every
    column in ``where`` has its value; returns how many rows changed. With
    ``at_least`` (column set -> column of the row), a column is set to the
    greater of its value and the row's other column (``single`` must do
    the same).

    On PostgreSQL, one statement per :data:`CHUNK` rows (module doc); else
    ``single`` (an update of one row whose bound parameters are ``key`` + ``_``
    and the other names of a row) is executed for every row."""
    if not rows:
        return 0
    if conn.dialect.name != "postgresql":
        values = [{f"{key}_" if k == key else k: v for k, v in row.items()} for row in rows]
        return int(conn.execute(single, values).rowcount)
    names = [key, *(name for name in columns if name != key)]
    types = {name: _sql_type(table.c[name]) for name in names}
    floors = at_least or {}

    def setting(name: str) -> str:
        value = _read(name, types[name])
        if name in floors:
            value = f'GREATEST({value}, {table.name}."{floors[name]}")'
        return f'"{name}" = {value}'

    settings = ", ".join(setting(name) for name in columns)
    shape = ", ".join(f'"{name}" {types[name]}' for name in names)
    condition = f'{table.name}."{key}" = v."{key}"'
    for name in where or {}:
        # a filter on the rows found by their key, written so that it proves
        # no partial index's predicate: with statistics older than a burst,
        # ``status = 'scheduled'`` made the planner read every queued run
        # through ix_task_run_queued for each batch
        condition += f' AND {table.name}."{name}" IS NOT DISTINCT FROM :where_{name}'
    statement = sa.text(
        f"UPDATE {table.name} SET {settings}"
        f" FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS v({shape})"
        f" WHERE {condition}"
    )
    bound = {f"where_{name}": value for name, value in (where or {}).items()}
    ordered = sorted(rows, key=lambda row: row[key])
    changed = 0
    for chunk in _chunks(ordered):
        payload = [{n: _value(n, types[n], row[n]) for n in names} for row in chunk]
        found = conn.execute(statement, {"rows": json.dumps(payload), **bound})
        changed += int(found.rowcount)
    return changed


__all__ = ["CHUNK", "among", "update_rows"]
