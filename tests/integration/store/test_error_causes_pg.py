"""The store's translation of driver errors provoked for real (store/errors.py):
a prepared statement made twice or never made, on a raw psycopg connection
to the local PostgreSQL; a table that is not there; a port that refuses; a
server that accepts and never answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import psycopg
import pytest
import services
import sqlalchemy.exc as sa_exc

from swh_like_scheduler.domain.exceptions import (
    PoolerMismatch,
    SchedulerError,
    SchemaMismatch,
    StoreUnavailable,
)
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.errors import translate


def translated(error: psycopg.Error) -> SchedulerError:
    return translate(sa_exc.DBAPIError.instance("", {}, error, psycopg.Error), "read tasks")


@pytest.fixture
def raw(postgres_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(services.libpq_url(postgres_url), autocommit=True) as conn:
        yield conn


def provoke(conn: psycopg.Connection, statement: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(statement)
    return info.value


@pytest.mark.postgresql
def test_a_real_prepared_statement_clash_is_named_as_one(raw: psycopg.Connection) -> None:
    raw.execute("PREPARE _pg3_1 AS SELECT 1")
    twice = provoke(raw, "PREPARE _pg3_1 AS SELECT 1")
    assert twice.sqlstate == "42P05"
    error = translated(twice)
    assert type(error) is PoolerMismatch and "already there" in str(error)
    never = provoke(raw, "EXECUTE _pg3_9")
    assert never.sqlstate == "26000"
    error = translated(never)
    assert type(error) is PoolerMismatch and "not found" in str(error)
    assert "schema" not in str(error)


@pytest.mark.postgresql
def test_a_real_missing_table_says_schema(raw: psycopg.Connection) -> None:
    error = translated(provoke(raw, "SELECT * FROM no_such_table_here"))
    assert type(error) is SchemaMismatch and "db init" in str(error)


def test_a_port_that_refuses_is_out_of_reach() -> None:
    with socket.socket() as sock:  # a free port: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = SQLAlchemyStore.from_url(f"postgresql://x@127.0.0.1:{port}/x?connect_timeout=2")
    try:
        with pytest.raises(StoreUnavailable, match="cannot reach the database") as info:
            store.get_task_types()
    finally:
        store.close()
    assert "is running" in str(info.value)


def test_a_server_that_never_answers_is_said_to_be_slow() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts (the kernel does), never speaks
        port = silent.getsockname()[1]
        store = SQLAlchemyStore.from_url(f"postgresql://x@127.0.0.1:{port}/x?connect_timeout=1")
        try:
            with pytest.raises(StoreUnavailable, match="did not answer in time"):
                store.get_task_types()
        finally:
            store.close()
