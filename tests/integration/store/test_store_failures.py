"""Driver errors reach callers as scheduler errors, and claims are exclusive."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from test_store_contract import make_task

from swh_like_scheduler.domain.exceptions import InvalidInput, StoreUnavailable
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore, make_engine

H = timedelta(hours=1)


def test_unreachable_postgresql_is_reported_without_driver_error() -> None:
    store = SQLAlchemyStore.from_url("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(StoreUnavailable, match="cannot reach the database") as info:
        store.get_task_types()
    assert "--db-url" in str(info.value)
    store.close()


def test_unsupported_url_names_the_field() -> None:
    with pytest.raises(InvalidInput) as info:
        make_engine("mysql://localhost/x")
    assert info.value.field == "db-url"
    with pytest.raises(InvalidInput):
        make_engine("not a url")


@pytest.mark.postgresql
def test_concurrent_claims_on_postgresql_are_disjoint(postgres_url: str, now: datetime) -> None:
    """Several runners claiming at once never get the same task (SKIP LOCKED)."""
    setup = SQLAlchemyStore.from_url(postgres_url)
    setup.create_task_type(TaskType(type="sleep", backend_name="sleep"))
    setup.import_tasks(
        (make_task(now, n, offset=-H, deadline=timedelta(seconds=n)) for n in range(3000)),
        now=now,
    )
    assert setup.capabilities.skip_locked
    setup.close()
    claimed: list[list[int]] = [[] for _ in range(4)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def runner(slot: int) -> None:
        store = SQLAlchemyStore.from_url(postgres_url)
        try:
            barrier.wait()
            while batch := store.claim_ready_tasks("sleep", now=now, limit=50):
                claimed[slot].extend(c.task_id for c in batch)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=runner, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    every = [task_id for ids in claimed for task_id in ids]
    assert len(every) == 3000
    assert len(set(every)) == 3000
    assert sum(1 for ids in claimed if ids) >= 2, "claims were not concurrent"


def test_sqlite_store_declares_a_single_runner(sqlite_url: str) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    assert not store.capabilities.skip_locked
    assert not store.capabilities.concurrent_writers
    store.close()


@pytest.mark.parametrize(
    "kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]
)
def test_a_column_the_database_lacks_says_upgrade(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """A database one migration behind the code (a column missing) is named
    as such, not as a database out of reach."""
    import sqlalchemy as sa

    from swh_like_scheduler.domain.exceptions import SchemaMismatch

    url = str(request.getfixturevalue("sqlite_url" if kind == "sqlite" else "postgres_url"))
    store = SQLAlchemyStore.from_url(url)
    try:
        with store.engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE origin_visit_stats DROP COLUMN last_snapshot"))
        with pytest.raises(SchemaMismatch, match="db upgrade"):
            store.origin_visit_stats_get([("https://forge.example/a", "git")])
    finally:
        store.close()


def test_a_sqlite_file_locked_by_another_writer_says_so(sqlite_url: str) -> None:
    """A write that cannot take SQLite's write lock (another connection
    holds it) ends in the scheduler's error naming the lock, not the
    driver's exception; once the lock is released, the same call works. A
    read is never refused: WAL lets it read beside the writer."""
    import sqlite3

    from swh_like_scheduler.domain.exceptions import StoreError

    store = SQLAlchemyStore.from_url(sqlite_url)
    store.create_task_type(TaskType(type="first", backend_name="first"))
    # the pool hands the same connection back: it waits 0 ms for the lock
    with store.engine.connect() as conn:
        conn.connection.driver_connection.execute("PRAGMA busy_timeout = 0")  # type: ignore[union-attr]
    other = sqlite3.connect(store.engine.url.database or "", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable, match="locked by another process") as info:
            store.create_task_type(TaskType(type="second", backend_name="second"))
        assert isinstance(info.value, StoreError)
        assert [t.type for t in store.get_task_types()] == ["first"]
    finally:
        other.execute("ROLLBACK")
        other.close()
    store.create_task_type(TaskType(type="second", backend_name="second"))
    assert sorted(t.type for t in store.get_task_types()) == ["first", "second"]
    store.close()
