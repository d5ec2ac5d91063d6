"""One held PostgreSQL connection per thread, for the start guard's statement.

Every start of a run of ours runs one statement (:mod:`.sql_guard`) from the
worker's process. Through the engine, that statement pays a pool checkout
and check-in and SQLAlchemy's execution machinery each time: measured on a
2-core machine, 0.26 ms of the worker's CPU per start, against 0.06 ms for
the same statement on a connection the thread keeps, prepared once by the
server (`benchmarks/README.md`, "Where the CPU goes"). The statement and its
durability are the same: each call is committed as it runs (autocommit),
before the body starts.

:class:`HeldConnections` keeps one autocommit psycopg connection per thread,
made from the engine's URL and options, with the engine's session bounds
(:func:`.engine.connect_parameters`), but outside its pool, so a thread
pool of any size never waits on the pool's limit. A connection that fails
(the server restarted, the network dropped) is closed and forgotten: the
call raises the store's error (:func:`.errors.translate`), as the engine's
path does, and the next call connects again. A process made by ``fork``
never uses its parent's connections (they belong to the parent's sessions).
Only a store that owns its engine holds connections, and
:meth:`HeldConnections.close` (called by the store's ``close``) closes them.

Behind a pooler in transaction mode (:mod:`.pooler`) the connection keeps
nothing between calls: no session ``SET``, no prepared statement. Each call
is its own transaction, which sets the session's bounds and time zone for
itself first (``BEGIN`` and the settings in one round trip, the statement,
``COMMIT``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc

from .engine import Sessions, connect_parameters, sessions_of
from .errors import translate


class _PerThread(threading.local):
    connection: Any = None
    pid: int = 0


class HeldConnections:
    """Autocommit connections held per thread (module doc)."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._local = _PerThread()
        self._lock = threading.Lock()
        self._open: list[Any] = []
        self._statements: dict[str, str] = {}
        #: a fork's copies of the parent's connections: kept, never used or closed
        self._inherited: list[Any] = []
        sessions = sessions_of(engine)
        #: behind a pooler: what begins each call's transaction (``None``: no pooler)
        self._begin = _begin_text(sessions) if sessions is not None else None

    def _connect(self) -> Any:
        args, options = connect_parameters(self._engine)
        connection = self._engine.dialect.connect(*args, **options)
        connection.autocommit = True
        if self._begin is None:
            connection.execute("SET TIME ZONE 'UTC'")
        with self._lock:
            self._open.append(connection)
        return connection

    def _connection(self) -> Any:
        local = self._local
        if local.connection is not None and local.pid != os.getpid():
            with self._lock:  # a fork: the parent's session, not ours
                self._inherited.append(local.connection)
                self._open = []
            local.connection = None
        if local.connection is None or local.connection.closed:
            local.connection = self._connect()
            local.pid = os.getpid()
        return local.connection

    def _forget(self, connection: Any) -> None:
        if self._local.connection is connection:
            self._local.connection = None
        with self._lock:
            if connection in self._open:
                self._open.remove(connection)
        with contextlib.suppress(Exception):  # already broken: nothing to release
            connection.close()

    def _text(self, statement: sa.TextClause) -> str:
        key = statement.text
        text = self._statements.get(key)
        if text is None:
            text = str(statement.compile(dialect=self._engine.dialect))
            self._statements[key] = text
        return text

    def fetch_one(
        self, where: str, statement: sa.TextClause, values: Mapping[str, Any]
    ) -> tuple[Any, ...] | None:
        """Run ``statement`` (committed as it runs) on this thread's
        connection, prepared by the server; its first row or ``None``."""
        text = self._text(statement)
        driver_error = self._engine.dialect.loaded_dbapi.Error
        try:
            connection = self._connection()
        except driver_error as error:
            raise _translated(error, driver_error, text, values, where) from error
        sessions = sessions_of(self._engine)
        watch = sessions.watch if sessions is not None else None
        try:
            backend_pid = connection.info.backend_pid
            if self._begin is not None:
                backend_pid = self._begin_transaction(connection)
            if watch is not None:
                watch.begin(backend_pid, text)
            try:
                prepare = self._begin is None  # a pooler's next lender has never seen it
                row = connection.execute(text, dict(values), prepare=prepare).fetchone()
            finally:
                if watch is not None:
                    watch.end()
            if self._begin is not None:
                connection.execute("COMMIT")
        except driver_error as error:
            if self._begin is not None:
                self._end_transaction(connection)
            if connection.broken or connection.closed or not _statement_error(error):
                self._forget(connection)
            raise _translated(error, driver_error, text, values, where) from error
        return tuple(row) if row is not None else None

    def _begin_transaction(self, connection: Any) -> int:
        """``BEGIN`` and the session's settings for the transaction (one
        round trip); the server process the pooler lent for it."""
        cursor = connection.execute(self._begin)
        cursor.nextset()
        found = cursor.fetchone()
        return int(found[-1]) if found else 0

    def _end_transaction(self, connection: Any) -> None:
        """Roll back a transaction a failure left open (nothing was written),
        giving the pooler its server connection back."""
        if connection.closed or connection.broken:
            return
        try:
            connection.execute("ROLLBACK")
        except Exception:  # the connection is no good: forgotten by the caller
            with contextlib.suppress(Exception):
                connection.close()

    def close(self) -> None:
        """Close every connection this object opened in this process."""
        with self._lock:
            connections, self._open = self._open, []
        for connection in connections:
            with contextlib.suppress(Exception):  # a broken one: nothing to release
                connection.close()
        self._local.connection = None


def _begin_text(sessions: Sessions) -> str | None:
    """``BEGIN`` then the ``SELECT`` that sets ``sessions``' settings for
    the transaction, values written in (one simple query, one round trip);
    ``None`` without a pooler."""
    if sessions.pooler is None:
        return None
    from psycopg import sql

    calls = [
        sql.SQL("set_config({}, {}, true)").format(sql.Literal(name), sql.Literal(value))
        for name, value in sessions.per_transaction.items()
    ]
    select = sql.SQL(", ").join([*calls, sql.SQL("pg_backend_pid()")])
    return sql.SQL("BEGIN; SELECT {}").format(select).as_string(None)


def _statement_error(error: BaseException) -> bool:
    """A failure of the statement itself (a constraint, a bad value), after
    which the connection is still good."""
    sqlstate = getattr(error, "sqlstate", None) or ""
    return sqlstate[:2] in ("22", "23", "40", "42")


def _translated(
    error: Exception, base: type[Exception], text: str, values: Mapping[str, Any], where: str
) -> Exception:
    """The store's error for a driver's ``error`` (as the engine's path gives)."""
    wrapped = sa_exc.DBAPIError.instance(text, dict(values), error, base)
    return translate(wrapped, where)


__all__ = ["HeldConnections"]
