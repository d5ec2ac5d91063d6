"""The store through a real PgBouncer in transaction mode (tests/pooler.py).

With ``?pooler=transaction`` every transaction carries the session's bounds
and the UTC time zone, nothing is left on the server connections the pooler
lends to others (no setting, no prepared statement), and the runner's
wake-ups LISTEN on PostgreSQL itself when the URL gives its address.
Without it, the pooler's refusal and the prepared statements it mixes up
are named as what they are."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import services
import sqlalchemy as sa
from pooler import PrivatePgBouncer, pgbouncer

from swh_like_scheduler.domain.exceptions import PoolerMismatch, SchedulerError
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.runner.wakeup import PostgresWaker, SleepWaker, waker_for
from swh_like_scheduler.store import SQLAlchemyStore, migrations

pytestmark = pytest.mark.postgresql

#: a time zone of the database's own, so that a session left without ours shows
DATABASE_ZONE = "Asia/Tokyo"


def database_of(url: str) -> str:
    return urllib.parse.urlsplit(url).path.lstrip("/")


@pytest.fixture
def database(postgres_url: str) -> str:
    """The test's database, in another time zone than UTC by default."""
    with psycopg.connect(services.libpq_url(postgres_url), autocommit=True) as admin:
        name = database_of(postgres_url)
        admin.execute(f"ALTER DATABASE {name} SET timezone = '{DATABASE_ZONE}'")
    return name


@pytest.fixture
def bouncer(postgres_url: str, database: str) -> Iterator[PrivatePgBouncer]:
    """One server connection for every client: whatever a session left
    behind, the next client finds it."""
    with pgbouncer(postgres_url, [database], pool_size=1) as running:
        yield running


def make_tasks(store: SQLAlchemyStore, count: int) -> datetime:
    store.create_task_type(
        TaskType(type="t", backend_name="tests.pooled", default_interval=timedelta(hours=1))
    )
    now = datetime.now(UTC) - timedelta(minutes=1)
    store.create_tasks(
        [
            Task(
                type="t",
                args=(n,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=now,
                deadline=now + timedelta(seconds=n),
            )
            for n in range(count)
        ],
        now=now,
    )
    return now


def test_every_transaction_is_bounded_and_nothing_stays_on_the_lent_connection(
    bouncer: PrivatePgBouncer, database: str
) -> None:
    store = SQLAlchemyStore.from_url(bouncer.url(database, pooler="transaction"), role="runner")
    try:
        migrations.check(store.engine)
        now = make_tasks(store, 12)
        # every statement more than psycopg's 5 executions before it prepares
        for _ in range(3):
            claimed = store.claim_ready_tasks("t", now=datetime.now(UTC), limit=4)
            for one in claimed:
                assert one.slot.utcoffset() == timedelta(0)  # read in UTC
                assert one.slot == now
                assert store.guard_start(one.backend_id, node="n", name="w", tag="x").granted
            for _ in range(4):
                store.get_task_types()
                store.search_tasks(limit=100)
        with store.engine.connect() as conn:
            shown = conn.exec_driver_sql(
                "SELECT current_setting('statement_timeout'), "
                "current_setting('idle_in_transaction_session_timeout'), "
                "current_setting('TimeZone')"
            ).one()
        assert tuple(shown) == ("30s", "30s", "UTC")
        held = store._held
        assert held is not None
        guard_sees = held.fetch_one(
            "show",
            sa.text("SELECT current_setting('statement_timeout'), current_setting('TimeZone')"),
            {},
        )
        assert guard_sees == ("30s", "UTC")
    finally:
        store.close()
    # the one server connection every session above used, as another client finds it
    with psycopg.connect(
        services.libpq_url(bouncer.url(database)), autocommit=True, prepare_threshold=None
    ) as other:
        for _ in range(3):
            row = other.execute(
                "SELECT current_setting('statement_timeout'), current_setting('TimeZone'), "
                "(SELECT count(*) FROM pg_prepared_statements)"
            ).fetchone()
            assert row == ("0", DATABASE_ZONE, 0)


def test_without_the_pooler_mode_the_refusal_is_named(
    bouncer: PrivatePgBouncer, database: str
) -> None:
    store = SQLAlchemyStore.from_url(bouncer.url(database), role="runner")
    try:
        with pytest.raises(PoolerMismatch) as info:
            migrations.check(store.engine)
    finally:
        store.close()
    message = str(info.value)
    assert "a connection pooler (PgBouncer) refused the connection" in message
    assert "'options'" in message and "?pooler=transaction" in message
    assert "cannot reach" not in message


def test_prepared_statements_mixed_up_by_the_pooler_are_named(
    postgres_url: str, database: str
) -> None:
    """The old workaround (the pooler ignores ``options``) without the
    pooler mode: psycopg prepares a statement after 5 executions, on a
    server connection the next client gets too."""
    with pgbouncer(
        postgres_url,
        [database],
        pool_size=1,
        settings={"ignore_startup_parameters": "options"},
    ) as bouncer:
        stores = [SQLAlchemyStore.from_url(bouncer.url(database), role="runner") for _ in range(2)]
        failure: SchedulerError | None = None
        try:
            for _ in range(10):
                for store in stores:
                    store.get_task_types()
        except SchedulerError as error:
            failure = error
        finally:
            for store in stores:
                store.close()
    assert isinstance(failure, PoolerMismatch), failure
    assert "a prepared statement of this session was" in str(failure)
    assert "?pooler=transaction" in str(failure) and "schema" not in str(failure)


def test_wake_ups_poll_behind_the_pooler_or_listen_on_postgresql_itself(
    bouncer: PrivatePgBouncer, database: str, postgres_url: str
) -> None:
    polled = SQLAlchemyStore.from_url(bouncer.url(database, pooler="transaction"))
    assert isinstance(waker_for(polled.engine), SleepWaker)
    polled.close()
    server = urllib.parse.urlsplit(services.libpq_url(postgres_url))
    url = bouncer.url(
        database,
        pooler="transaction",
        direct_host=server.hostname or "127.0.0.1",
        direct_port=str(server.port or 5432),
    )
    store = SQLAlchemyStore.from_url(url, role="runner")
    stop = threading.Event()
    waker = waker_for(store.engine, stop)
    try:
        assert isinstance(waker, PostgresWaker)
        assert not waker.wait(0.2)
        make_tasks(store, 1)  # its NOTIFY goes through the pooler, at commit
        assert waker.wait(10)
    finally:
        waker.close()
        store.close()
