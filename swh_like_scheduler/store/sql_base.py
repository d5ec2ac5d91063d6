"""Plumbing shared by the SQLAlchemy store's parts: engine, transactions,
bulk inserts with ids allocated up front, wake-up notifications."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..domain.model import MAX_ARGUMENT_BYTES, Priority, TaskStatus
from ..visits.model import DISABLE_AFTER_FAILURES, ORIGIN_SCHEMES
from .engine import WRITE_OPTION, capabilities_of, make_engine, pooler_of, sessions_of
from .errors import translated
from .interface import (
    READY_CHANNEL,
    Capabilities,
)
from .sql_held import HeldConnections
from .tables import task as task_t
from .tables import task_type as task_type_t

_CHUNK = 500  # ids or hashes per IN (...) list
#: a type's pause, read (built once: every claim and write of a type asks)
_PAUSED = sa.select(task_type_t.c.paused_at).where(
    task_type_t.c.type == sa.bindparam("paused_type")
)
_PAUSED_LOCKED = _PAUSED.with_for_update(read=True)


def upsert_into(dialect: str, table: sa.Table) -> Any:
    """``INSERT`` into ``table`` with the ``ON CONFLICT`` clauses of the
    dialect named ``dialect`` (PostgreSQL's, else SQLite's)."""
    return (postgresql if dialect == "postgresql" else sqlite).insert(table)


class _Writing(threading.local):
    """The connection of the write transaction this thread has open, if any."""

    connection: sa.Connection | None = None


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SQLBase:
    """Engine, capabilities and transaction helpers of :class:`SQLAlchemyStore`."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        owns_engine: bool = False,
        max_argument_bytes: int | None = MAX_ARGUMENT_BYTES,
    ) -> None:
        self.engine = engine
        self._owns_engine = owns_engine
        #: new tasks whose arguments' JSON is longer are refused (``None``: no limit)
        self.max_argument_bytes = max_argument_bytes
        #: the url schemes a listed origin may have (``[visits] origin_schemes``)
        self.origin_schemes: frozenset[str] = ORIGIN_SCHEMES
        #: failures in a row that disable an origin (``[visits] disable_after_failures``)
        self.disable_after_failures: int = DISABLE_AFTER_FAILURES
        self._capabilities = capabilities_of(engine)
        #: the connection of an open :meth:`transaction`, shared by every call
        self._bound: sa.Connection | None = None
        #: per thread, the connection of a write under way: a read made
        #: during it (an ``apply`` callback reading a task type) runs on it
        #: rather than wait for a second connection of a bounded pool, which
        #: every thread of a busy worker could be waiting for at once
        self._writing = _Writing()
        #: connections held per thread for the start guard's statement, when
        #: this store owns its engine (PostgreSQL): :mod:`.sql_held`
        self._held = (
            HeldConnections(engine) if owns_engine and self._capabilities.writable_ctes else None
        )
        #: behind a pooler in transaction mode (:mod:`.pooler`): nothing in autocommit
        self._pooled = pooler_of(engine) is not None

    @classmethod
    def from_url(
        cls,
        url: str | sa.URL,
        *,
        max_argument_bytes: int | None = MAX_ARGUMENT_BYTES,
        **engine_kwargs: Any,
    ) -> Self:
        return cls(
            make_engine(url, **engine_kwargs),
            owns_engine=True,
            max_argument_bytes=max_argument_bytes,
        )

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    def close(self) -> None:
        if self._owns_engine and self._bound is None:
            if self._held is not None:
                self._held.close()
            self.engine.dispose()

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """A view of this store whose calls all run in one transaction,
        committed when the block ends (rolled back if it raises)."""
        if self._bound is not None:
            yield self
            return
        with translated("transaction"), self.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                bound = copy.copy(self)
                bound._bound = conn
                bound._owns_engine = False
                yield bound

    # -- plumbing -----------------------------------------------------------

    @contextmanager
    def _write(self, where: str) -> Iterator[sa.Connection]:
        if self._bound is not None:
            with translated(where):
                yield self._bound
            return
        with translated(where), self.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                outer, self._writing.connection = self._writing.connection, conn
                try:
                    yield conn
                finally:
                    self._writing.connection = outer

    @contextmanager
    def _single(self, where: str) -> Iterator[sa.Connection]:
        """A connection for **one** statement that is atomic on its own,
        committed as it runs (autocommit: no BEGIN and COMMIT round trips);
        inside a :meth:`transaction`, that transaction's connection. Behind
        a pooler, a transaction of its own: the session's bounds are set in
        each transaction (:mod:`.pooler`)."""
        if self._bound is not None:
            with translated(where):
                yield self._bound
            return
        if self._pooled:
            with translated(where), self.engine.connect() as conn, conn.begin():
                yield conn
            return
        with translated(where), self.engine.connect() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")

    @contextmanager
    def _read(self, where: str) -> Iterator[sa.Connection]:
        bound = self._bound if self._bound is not None else self._writing.connection
        if bound is not None:
            with translated(where):
                yield bound
            return
        with translated(where), self.engine.connect() as conn, conn.begin():
            yield conn

    def _maintenance(self, conn: sa.Connection) -> None:
        """Let the statements of ``conn``'s transaction (outside a caller's)
        run up to the maintenance bound of the engine's sessions instead of
        their statement timeout (PostgreSQL): statistics, counts over every
        task, which grow with the table and are not worth failing for. The
        bound is never lowered: a session without a statement timeout keeps
        none."""
        sessions = sessions_of(self.engine)
        if sessions is None or self._bound is not None:
            return
        session_ms = sessions.timeout_ms("statement_timeout")
        bound = sessions.bounds.maintenance_timeout
        if session_ms <= 0:
            return
        ms = 0 if bound is None else max(session_ms, bound.total_seconds() * 1000)
        conn.execute(sa.select(sa.func.set_config("statement_timeout", f"{int(ms)}ms", True)))

    def _one_core(self, conn: sa.Connection) -> None:
        """Run the statements of ``conn``'s transaction without parallel
        workers (PostgreSQL): a background count over a large table then
        takes one core, not every core of the server, from the requests
        that must answer quickly meanwhile."""
        if self.engine.dialect.name == "postgresql":
            conn.execute(
                sa.select(sa.func.set_config("max_parallel_workers_per_gather", "0", True))
            )

    def _serialise(self, where: str, name: str) -> None:
        """Hold the lock ``name`` until the current transaction ends, so that
        two transactions about the same thing (a job's key) run one after
        the other: a transaction-level advisory lock on PostgreSQL; SQLite's
        write transaction already excludes every other writer."""
        if self.engine.dialect.name != "postgresql":
            return
        with self._write(where) as conn:
            conn.execute(
                sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"),
                {"name": name},
            )

    def _lock(self, query: sa.Select[Any]) -> sa.Select[Any]:
        """Lock selected rows until commit where the engine can (PostgreSQL);
        SQLite's write transaction already excludes every other writer."""
        if self._capabilities.skip_locked:
            return query.with_for_update()
        return query

    def _type_paused(self, conn: sa.Connection, name: str) -> bool:
        """Whether the task type ``name`` is paused, read in the caller's
        transaction. On PostgreSQL the type's row is share-locked until that
        transaction ends: a pause (which updates the row) waits for the
        claims under way, and a claim that begins after a pause sees it."""
        query = _PAUSED_LOCKED if self._capabilities.skip_locked else _PAUSED
        return conn.scalar(query, {"paused_type": name}) is not None

    def _upsert(self, table: sa.Table) -> Any:
        """``INSERT`` into ``table`` with the dialect's ``ON CONFLICT`` clauses."""
        return upsert_into(self.engine.dialect.name, table)

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
            conn.execute(self._upsert(table).on_conflict_do_nothing(), values)
        else:
            conn.execute(sa.insert(table), values)
        return ids

    def _announce(self, conn: sa.Connection, type_names: Iterable[str]) -> None:
        """Wake runners (on commit) for types that may have new ready tasks."""
        if self._capabilities.notifications:
            for name in sorted(set(type_names)):
                conn.execute(sa.select(sa.func.pg_notify(READY_CHANNEL, name)))

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
