"""Each cause of a database failure is named as what it is at the store's
boundary (store/errors.py), from real driver exceptions as psycopg and
sqlite3 raise them, wrapped by SQLAlchemy as the store receives them: a
full disk, a pooler's refusal, a prepared-statement clash, a missing
table, a refused login, a server out of reach."""

from __future__ import annotations

import sqlite3

import psycopg
import psycopg.errors as pg_errors
import pytest
import sqlalchemy.exc as sa_exc

from swh_like_scheduler.domain.exceptions import (
    DiskFull,
    PoolerMismatch,
    SchedulerError,
    SchemaMismatch,
    StoreError,
    StoreUnavailable,
)
from swh_like_scheduler.store.errors import translate, translated

WHERE = "claim ready tasks"


def wrapped(error: Exception) -> sa_exc.SQLAlchemyError:
    """``error`` as SQLAlchemy hands it over (its DB-API class kept)."""
    base = psycopg.Error if isinstance(error, psycopg.Error) else sqlite3.Error
    found = sa_exc.DBAPIError.instance("SELECT 1", {}, error, base)
    assert isinstance(found, sa_exc.SQLAlchemyError)
    return found


def cause(error: Exception) -> SchedulerError:
    return translate(wrapped(error), WHERE)


def refused_at_connect(message: str) -> psycopg.OperationalError:
    """A connection that failed, as psycopg words it (no SQLSTATE)."""
    return psycopg.OperationalError(
        f'connection failed: connection to server at "127.0.0.1", port 6432 failed: {message}'
    )


def test_a_full_disk_is_named_whatever_the_driver_class() -> None:
    server = cause(
        pg_errors.DiskFull('could not extend file "base/16384/16390": No space left on device')
    )
    assert type(server) is DiskFull and isinstance(server, StoreUnavailable)
    assert "disk is full" in str(server) and "nothing of this was written" in str(server)
    assert "cannot reach" not in str(server)
    # the OS's words without a SQLSTATE (a WAL write, a temporary file)
    wal = cause(
        psycopg.OperationalError(
            'could not write to file "pg_wal/xlogtemp.4242": No space left on device'
        )
    )
    assert type(wal) is DiskFull and "cannot reach" not in str(wal)
    # SQLite's
    sqlite = cause(sqlite3.OperationalError("database or disk is full"))
    assert type(sqlite) is DiskFull


def test_a_poolers_refusal_of_options_is_named_with_the_url_to_write() -> None:
    error = cause(refused_at_connect("FATAL:  unsupported startup parameter: options"))
    assert type(error) is PoolerMismatch
    message = str(error)
    assert message.startswith(f"{WHERE}: a connection pooler (PgBouncer) refused the connection")
    assert "'options'" in message and "?pooler=transaction" in message
    assert "Behind PgBouncer" in message
    assert "cannot reach" not in message and "is running" not in message


def test_a_poolers_refusal_of_another_parameter_names_it() -> None:
    error = cause(refused_at_connect("FATAL:  unsupported startup parameter: search_path"))
    assert type(error) is PoolerMismatch
    assert "'search_path'" in str(error) and "remove it from the database URL" in str(error)


@pytest.mark.parametrize(
    ("error", "fate"),
    [
        (
            pg_errors.DuplicatePreparedStatement('prepared statement "_pg3_1" already exists'),
            "already there",
        ),
        (
            pg_errors.InvalidSqlStatementName('prepared statement "_pg3_1" does not exist'),
            "not found",
        ),
    ],
)
def test_a_prepared_statement_clash_is_a_pooler_mismatch_not_a_missing_schema(
    error: Exception, fate: str
) -> None:
    found = cause(error)
    assert type(found) is PoolerMismatch
    assert f"a prepared statement of this session was {fate}" in str(found)
    assert "?pooler=transaction" in str(found)
    assert "schema" not in str(found) and "db init" not in str(found)


def test_the_same_clash_without_sqlstate_is_read_from_its_words() -> None:
    found = cause(psycopg.OperationalError('prepared statement "_pg3_0" does not exist'))
    assert type(found) is PoolerMismatch


def test_only_a_table_really_missing_says_schema() -> None:
    table = cause(pg_errors.UndefinedTable('relation "task" does not exist'))
    assert type(table) is SchemaMismatch
    assert "no scheduler schema" in str(table) and "db init" in str(table)
    assert type(cause(sqlite3.OperationalError("no such table: task"))) is SchemaMismatch
    column = cause(pg_errors.UndefinedColumn("column task.fence does not exist"))
    assert type(column) is SchemaMismatch and "db upgrade" in str(column)
    # other things that "do not exist" are not a missing schema
    role = cause(refused_at_connect('FATAL:  role "swh" does not exist'))
    assert not isinstance(role, SchemaMismatch)
    function = cause(pg_errors.UndefinedFunction("function nope() does not exist"))
    assert not isinstance(function, SchemaMismatch)


def test_a_refused_login_is_not_an_unreachable_server() -> None:
    error = cause(refused_at_connect('FATAL:  password authentication failed for user "swh"'))
    assert type(error) is StoreError
    assert "refused the login" in str(error) and "cannot reach" not in str(error)


def test_an_unreachable_server_says_so() -> None:
    refused = cause(
        psycopg.OperationalError(
            'connection failed: connection to server at "127.0.0.1", port 1 failed: '
            "Connection refused\n\tIs the server running on that host and accepting TCP/IP?"
        )
    )
    assert type(refused) is StoreUnavailable
    assert "cannot reach the database" in str(refused) and "is running" in str(refused)
    slow = cause(psycopg.OperationalError("connection timeout expired"))
    assert type(slow) is StoreUnavailable
    assert "did not answer in time" in str(slow)


def test_a_server_that_restarts_or_ends_the_session_is_not_called_unreachable() -> None:
    recovering = cause(refused_at_connect("FATAL:  the database system is in recovery mode"))
    assert type(recovering) is StoreUnavailable
    assert "starting, stopping or recovering from a crash" in str(recovering)
    assert "cannot reach" not in str(recovering)
    ended = cause(pg_errors.AdminShutdown("terminating connection due to administrator command"))
    assert type(ended) is StoreUnavailable
    assert "ended the connection" in str(ended) and "cannot reach" not in str(ended)
    closed = cause(
        psycopg.OperationalError(
            "consuming input failed: server closed the connection unexpectedly"
        )
    )
    assert "ended the connection" in str(closed)


def test_pgbouncers_own_refusals_name_the_pooler() -> None:
    behind = cause(refused_at_connect("ERROR:  pgbouncer cannot connect to server"))
    assert type(behind) is StoreUnavailable
    assert "the connection pooler in front of PostgreSQL cannot reach PostgreSQL" in str(behind)
    full = cause(refused_at_connect("FATAL:  no more connections allowed (max_client_conn)"))
    assert "max_client_conn" in str(full)


def test_too_many_clients_is_named() -> None:
    error = cause(pg_errors.TooManyConnections("sorry, too many clients already"))
    assert type(error) is StoreUnavailable and "no connection left" in str(error)


def test_translated_turns_a_real_sqlite_full_disk_into_disk_full() -> None:
    """SQLite refusing to grow its file (``max_page_count``) as a full volume does."""
    import sqlalchemy as sa

    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x TEXT)")
        conn.exec_driver_sql("PRAGMA max_page_count = 2")
        with pytest.raises(DiskFull, match="disk is full"), translated("store rows"):
            for _ in range(100):
                conn.exec_driver_sql("INSERT INTO t VALUES (?)", ("x" * 4000,))
    engine.dispose()
