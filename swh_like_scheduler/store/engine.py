"""Building SQLAlchemy engines for the two supported databases.

The caller owns the engine's lifetime (``engine.dispose()``); a store built
with :func:`~swh_like_scheduler.store.open_store` owns the one it creates.
"""

from __future__ import annotations

import os
import sqlite3
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from ..domain.exceptions import InvalidInput
from .interface import Capabilities
from .json_read import json_loads
from .lockwatch import LockWatch
from .pooler import (
    Pooler,
    direct_parameters,
    pooled_parameters,
    settings_statement,
    split_pooler,
    transaction_settings,
)
from .session import PoolSize, SessionBounds, bounded_parameters, duration_ms, named_settings

#: Execution option that makes a SQLite transaction take the write lock at
#: ``BEGIN`` (``BEGIN IMMEDIATE``) instead of failing later on upgrade.
WRITE_OPTION = "swh_write"

SUPPORTED = ("postgresql", "sqlite")


def normalise_url(url: str | sa.URL) -> sa.URL:
    """Parse a database URL, choosing the psycopg 3 driver for PostgreSQL."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise InvalidInput(
            "db-url",
            f"{url!r} is not a database URL "
            "(examples: sqlite:////var/lib/swh/scheduler.db, postgresql://user@host/db)",
        ) from None
    backend = parsed.get_backend_name()
    if backend not in SUPPORTED:
        raise InvalidInput(
            "db-url", f"{backend!r} databases are not supported; use postgresql or sqlite"
        )
    if backend == "postgresql" and parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def missing_sqlite_file(url: str | sa.URL) -> Path | None:
    """The file a SQLite ``url`` names when it does not exist (``None``: it
    exists, or ``url`` is not a SQLite file). Opening such a URL would create
    the file, and its folders: a command that only reads asks first."""
    parsed = normalise_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):
        return None
    path = Path(database).expanduser()
    return None if path.exists() else path


def capabilities_of(engine: sa.Engine) -> Capabilities:
    if engine.dialect.name == "postgresql":
        return Capabilities(
            skip_locked=True,
            concurrent_writers=True,
            id_sequences=True,
            notifications=True,
            writable_ctes=True,
            planner_statistics=True,
        )
    return Capabilities(
        skip_locked=False, concurrent_writers=False, id_sequences=False, notifications=False
    )


@dataclass(frozen=True)
class Sessions:
    """How the sessions of a PostgreSQL engine are opened (:mod:`.session`)."""

    bounds: SessionBounds
    #: the libpq parameters of every connection: the URL's, completed
    parameters: dict[str, Any]
    #: reports statements that wait on a lock (``None``: off)
    watch: LockWatch | None
    #: the server settings every session runs with, by name: those of the
    #: ``options`` parameter (or, behind a pooler, set in each transaction)
    settings: Mapping[str, str] = field(default_factory=dict)
    #: the pooler the URL names (``None``: a direct connection): :mod:`.pooler`
    pooler: Pooler | None = None
    #: set at the start of each transaction, for it only (behind a pooler)
    per_transaction: Mapping[str, str] = field(default_factory=dict)
    #: the libpq parameters of a connection to PostgreSQL itself, past the
    #: pooler (``None``: none was given; without a pooler, ``parameters``)
    direct: dict[str, Any] | None = None

    def timeout_ms(self, name: str) -> float:
        """The milliseconds of the duration setting ``name`` each session
        runs with (0: no bound)."""
        value = self.settings.get(name)
        return duration_ms(name, value) if value is not None else 0.0


_SESSIONS: weakref.WeakKeyDictionary[sa.Engine, Sessions] = weakref.WeakKeyDictionary()


def sessions_of(engine: sa.Engine) -> Sessions | None:
    """The session set-up of ``engine`` (``None``: not a PostgreSQL engine
    made by :func:`make_engine`)."""
    return _SESSIONS.get(engine)


def pooler_of(engine: sa.Engine) -> Pooler | None:
    """The pooler ``engine``'s URL says it reaches PostgreSQL through
    (``None``: none, or not a PostgreSQL engine of :func:`make_engine`)."""
    sessions = sessions_of(engine)
    return sessions.pooler if sessions is not None else None


def connect_parameters(
    engine: sa.Engine, *, direct: bool = False
) -> tuple[list[Any], dict[str, Any]]:
    """``(args, kwargs)`` of the driver's ``connect`` for a connection made
    outside ``engine``'s pool with the same bounds (the start guard's held
    connections, the lock watch's). With ``direct``, one to PostgreSQL
    itself, past a pooler (the runner's ``LISTEN``): :class:`ValueError`
    when the URL names a pooler but not PostgreSQL's own address."""
    args, options = engine.dialect.create_connect_args(engine.url)
    sessions = sessions_of(engine)
    if sessions is not None:
        if direct and sessions.pooler is not None:
            if sessions.direct is None:
                raise ValueError("the database URL gives no direct_host / direct_port")
            options.update(sessions.direct)
        else:
            options.update(sessions.parameters)
    return list(args), dict(options)


def make_engine(
    url: str | sa.URL,
    *,
    role: str | None = None,
    bounds: SessionBounds | None = None,
    pool: PoolSize | None = None,
    **kwargs: Any,
) -> sa.Engine:
    """An engine for ``url`` set up the way the store expects.

    SQLite: the file's folder is created, foreign keys are enforced, WAL
    journal lets readers work while one process writes, and write
    transactions start with ``BEGIN IMMEDIATE`` so concurrent writers wait
    (up to the busy timeout) instead of failing mid-transaction.

    PostgreSQL: sessions use the UTC time zone, so that timestamps read
    through the driver directly (the claim's rows) are UTC whatever the
    server's ``TimeZone``, like those read through the store's types. Every
    connection is opened with the bounds of ``role`` (a daemon, ``cli``, or
    ``None`` for a library user: :meth:`SessionBounds.for_role`), or
    ``bounds``, completed by what the URL says (:mod:`.session`); a
    statement waiting on a lock is reported (:mod:`.lockwatch`). ``pool``
    sizes its pool (SQLAlchemy's default without it: 5 kept, 10 more at
    a burst). A URL whose query says ``pooler=transaction`` reaches
    PostgreSQL through a pooler (PgBouncer): no session state, the bounds
    and time zone set in each transaction (:mod:`.pooler`).
    """
    parsed, pooler = split_pooler(normalise_url(url))
    kwargs.setdefault("json_deserializer", json_loads)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, **kwargs)
    kwargs.setdefault("pool_pre_ping", True)
    if pool is not None:
        kwargs.setdefault("pool_size", pool.size)
        kwargs.setdefault("max_overflow", pool.overflow)
    try:
        engine = sa.create_engine(parsed, **kwargs)
    except (ModuleNotFoundError, sa.exc.NoSuchModuleError) as error:
        raise InvalidInput("db_url", _missing_driver(parsed, error)) from error
    if parsed.get_backend_name() == "postgresql":
        _bound_sessions(engine, bounds or SessionBounds.for_role(role), pooler)
        if pooler is None:
            event.listen(engine, "connect", _utc_session)
    return engine


def _bound_sessions(engine: sa.Engine, bounds: SessionBounds, pooler: Pooler | None) -> None:
    """Open every connection of ``engine`` with ``bounds`` (behind a
    pooler: set them in each transaction) and watch its statements' lock
    waits."""
    _, given = engine.dialect.create_connect_args(engine.url)
    given.pop("context", None)  # psycopg's adapters, not a libpq parameter
    parameters = bounded_parameters(given, bounds, os.environ)
    settings = named_settings(str(parameters.get("options") or ""))
    watch = None
    if bounds.lock_wait_log is not None and bounds.lock_wait_log.total_seconds() > 0:
        watch = LockWatch(_watch_connect(engine), bounds.lock_wait_log.total_seconds())
    if pooler is None:
        sessions = Sessions(bounds, parameters, watch, settings)
    else:
        sessions = Sessions(
            bounds,
            pooled_parameters(parameters),
            watch,
            settings,
            pooler,
            transaction_settings(settings),
            direct_parameters(parameters, pooler) if pooler.has_direct else None,
        )
        _per_transaction(engine, sessions.per_transaction)
    _SESSIONS[engine] = sessions
    opened_with = sessions.parameters

    @event.listens_for(engine, "do_connect")
    def _bounded(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        params.update(opened_with)

    if watch is None:
        return

    @event.listens_for(engine, "connect")
    def _note_pid(dbapi_connection: Any, record: Any) -> None:
        record.info["backend_pid"] = dbapi_connection.info.backend_pid

    @event.listens_for(engine, "before_cursor_execute")
    def _begin(conn: sa.Connection, _cursor: Any, statement: str, *_: Any) -> None:
        pid = conn.info.get("backend_pid")
        if pid is not None:
            watch.begin(pid, statement)

    @event.listens_for(engine, "after_cursor_execute")
    def _end(*_: Any) -> None:
        watch.end()

    @event.listens_for(engine, "handle_error")
    def _failed(_context: Any) -> None:
        watch.end()


def _per_transaction(engine: sa.Engine, settings: Mapping[str, str]) -> None:
    """Behind a pooler: set ``settings`` at the start of each transaction of
    ``engine``, for it only, and note the server process that runs it (the
    pooler lends another one to each transaction). A connection in
    autocommit has no transaction to set them in (the store runs none of
    its statements so behind a pooler)."""
    statement, values = settings_statement(settings)

    @event.listens_for(engine, "begin")
    def _set(conn: sa.Connection) -> None:
        if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
            return
        row = conn.exec_driver_sql(statement, values).one()
        conn.info["backend_pid"] = row[-1]


def _watch_connect(engine: sa.Engine) -> Any:
    """How the lock watch connects: like ``engine``, outside its pool,
    named apart, quick to give up."""
    reference = weakref.ref(engine)

    def connect() -> Any:
        found = reference()
        if found is None:
            raise RuntimeError("the engine is gone")
        args, options = connect_parameters(found)
        options.update(application_name="swh-scheduler-lockwatch", connect_timeout="5")
        connection = found.dialect.loaded_dbapi.connect(*args, **options)
        connection.autocommit = True
        return connection

    return connect


def _missing_driver(url: sa.URL, error: Exception) -> str:
    """What to install for ``url``'s driver (one line)."""
    name = getattr(error, "name", None) or str(error)
    if url.get_backend_name() == "postgresql" and url.get_driver_name() == "psycopg":
        return (
            f"the PostgreSQL driver is missing ({name}); "
            "install it with: pip install 'psycopg[binary]'"
        )
    return f"no driver for {url.drivername!r} ({name}); install the package it names"


def _utc_session(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SET TIME ZONE 'UTC'")
    finally:
        cursor.close()
    dbapi_connection.commit()


def _sqlite_engine(url: sa.URL, **kwargs: Any) -> sa.Engine:
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # let SQLAlchemy's "begin" event below decide how transactions start
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA busy_timeout = 30000")
        if database not in ("", ":memory:"):
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        # on the driver's connection itself: SQLAlchemy's execution of a
        # statement (its context, events and result) cost more than the
        # BEGIN, which every store call sends; its errors are wrapped as
        # that execution would have (a locked database reads the same)
        options = connection.get_execution_options()
        statement = "BEGIN IMMEDIATE" if options.get(WRITE_OPTION) else "BEGIN"
        try:
            connection.connection.driver_connection.execute(statement)  # type: ignore[union-attr]
        except sqlite3.Error as error:
            raise sa.exc.DBAPIError.instance(statement, None, error, sqlite3.Error) from error

    return engine
