"""Every PostgreSQL session of ours is bounded (store/session.py) and a
statement waiting on a lock is reported once (store/lockwatch.py), on a real
server: a held table lock, a held row lock, a transaction left idle."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import services
import sqlalchemy as sa
from waiting import wait_until

from swh_like_scheduler.domain.exceptions import StatementTimeout
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.runner.wakeup import PostgresWaker
from swh_like_scheduler.store import SQLAlchemyStore, make_engine, migrations
from swh_like_scheduler.store.session import SessionBounds

pytestmark = pytest.mark.postgresql

#: the server settings each session must carry, as SHOW prints them
SHOWN = {
    "statement_timeout": "30s",
    "idle_in_transaction_session_timeout": "30s",
    "tcp_keepalives_idle": "20",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "30000",
    "application_name": "swh-scheduler-runner",
}
SHOW = "SELECT " + ", ".join(f"current_setting('{name}')" for name in SHOWN)
WATCH_LOGGER = "swh_like_scheduler.store.lockwatch"


def libpq(url: str) -> str:
    return services.libpq_url(url)


@pytest.fixture
def admin(postgres_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(libpq(postgres_url), autocommit=True, application_name="test-admin") as c:
        yield c


def ready_task(store: SQLAlchemyStore) -> int:
    store.create_task_type(
        TaskType(type="t", backend_name="tests.bounds", default_interval=timedelta(hours=1))
    )
    now = datetime.now(UTC) - timedelta(minutes=1)
    task = Task(type="t", schedule_kind=ScheduleKind.ONESHOT, next_run=now, deadline=now)
    return store.create_tasks([task], now=now)[0].id or 0


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """``call()`` running in a thread; its value or error lands in the dict."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except Exception as error:
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def test_every_session_of_a_daemon_is_bounded_and_named(postgres_url: str) -> None:
    """The pool's sessions, the start guard's held ones and the runner's
    LISTEN: all three kinds carry the bounds and the daemon's name."""
    store = SQLAlchemyStore.from_url(postgres_url, role="runner")
    waker = PostgresWaker(store.engine)
    try:
        with store.engine.connect() as conn:
            pooled = tuple(conn.exec_driver_sql(SHOW).one())
        assert store._held is not None
        held = store._held.fetch_one("show", sa.text(SHOW), {})
        listening = tuple(waker._conn.execute(SHOW).fetchone())
        assert pooled == held == listening == tuple(SHOWN.values())
    finally:
        waker.close()
        store.close()


def test_a_read_waiting_on_a_lock_is_reported_once_then_cut_by_its_timeout(
    postgres_url: str, admin: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    """The runner's "next ready" read behind a table lock (it waited 62 s,
    silent): one warning naming the table and the holder, then the
    statement timeout ends it."""
    bounds = SessionBounds(
        statement_timeout=timedelta(seconds=4), lock_wait_log=timedelta(seconds=1)
    )
    store = SQLAlchemyStore.from_url(postgres_url, bounds=bounds)
    caplog.set_level(logging.WARNING, logger=WATCH_LOGGER)
    try:
        ready_task(store)
        with psycopg.connect(libpq(postgres_url), application_name="test-holder") as holder:
            holder.execute("LOCK TABLE task IN ACCESS EXCLUSIVE MODE")
            began = time.monotonic()
            thread, outcome = in_thread(lambda: store.next_ready_time("t"))
            thread.join(timeout=15)
            took = time.monotonic() - began
            holder.rollback()  # a read still waiting ends now
            thread.join()
        assert isinstance(outcome.get("error"), StatementTimeout), outcome
        assert took < 10
        reports = [r.getMessage() for r in caplog.records if r.name == WATCH_LOGGER]
        assert len(reports) == 1, reports
        assert "lock on table task, held by pid" in reports[0]
        assert "test-holder, idle in transaction: LOCK TABLE task" in reports[0]
        assert "SELECT min(task.next_run)" in reports[0]
    finally:
        store.close()


def test_a_guard_start_waiting_on_a_row_lock_is_reported(
    postgres_url: str, admin: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    """The start guard's held connection (outside the pool) is watched too;
    a row lock names the row's table."""
    bounds = SessionBounds(lock_wait_log=timedelta(seconds=1))
    store = SQLAlchemyStore.from_url(postgres_url, bounds=bounds)
    caplog.set_level(logging.WARNING, logger=WATCH_LOGGER)
    try:
        task_id = ready_task(store)
        run = store.schedule_task_run(task_id, now=datetime.now(UTC))
        with psycopg.connect(libpq(postgres_url), application_name="test-holder") as holder:
            holder.execute("SELECT id FROM task_run WHERE task_id = %s FOR UPDATE", (task_id,))
            thread, outcome = in_thread(
                lambda: store.guard_start(run.backend_id, node="n", name="w", tag="x")
            )

            def reported() -> bool:
                return any(r.name == WATCH_LOGGER for r in caplog.records)

            wait_until(reported, 15, "the guard's wait to be reported")
            holder.rollback()
            thread.join(timeout=15)
        assert outcome["value"].granted
        message = next(r.getMessage() for r in caplog.records if r.name == WATCH_LOGGER)
        assert "lock on table task_run, held by pid" in message
        assert "test-holder" in message
    finally:
        store.close()


def test_a_transaction_left_idle_is_ended_by_the_server_and_its_rows_freed(
    postgres_url: str, admin: psycopg.Connection
) -> None:
    """A claim whose process stopped between two statements: the server ends
    its session after the idle bound and the rows it locked are free."""
    bounds = SessionBounds(idle_in_transaction_timeout=timedelta(seconds=1))
    store = SQLAlchemyStore.from_url(postgres_url, bounds=bounds)
    try:
        task_id = ready_task(store)
        with store.engine.connect() as conn:
            transaction = conn.begin()
            conn.execute(sa.text("SELECT id FROM task WHERE id = :id FOR UPDATE"), {"id": task_id})

            def free() -> bool:
                try:
                    admin.execute("SELECT id FROM task WHERE id = %s FOR UPDATE NOWAIT", (task_id,))
                except psycopg.errors.LockNotAvailable:
                    return False
                return True

            wait_until(free, 15, "the idle transaction's row lock to be released")
            with pytest.raises(sa.exc.DBAPIError, match="idle-in-transaction"):
                conn.exec_driver_sql("SELECT 1")
            transaction.rollback()
        # the store goes on with a new session
        assert store.next_ready_time("t") is not None
    finally:
        store.close()


#: a client that reads nothing of a large result: stopped, it leaves the
#: server's session blocked writing to it (``ClientWrite``), where neither
#: the statement nor the idle timeout applies
STALLED_READER = """
import sys
from datetime import timedelta
from swh_like_scheduler.store import make_engine
from swh_like_scheduler.store.session import SessionBounds

bounds = SessionBounds(application_name="test-stalled", tcp_user_timeout=timedelta(seconds=3))
with make_engine(sys.argv[1], bounds=bounds).connect() as conn:
    print("reading", flush=True)
    conn.exec_driver_sql("SELECT repeat('x', 1000) FROM generate_series(1, 200000)").all()
"""


def test_a_session_blocked_writing_to_a_stopped_client_is_dropped(
    postgres_url: str, admin: psycopg.Connection
) -> None:
    """A runner stopped while the server still sends its claim's rows:
    the server's ``tcp_user_timeout`` drops the session (and its locks)."""
    reader = subprocess.Popen(
        [sys.executable, "-c", STALLED_READER, postgres_url], stdout=subprocess.PIPE
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline()

        def state() -> str | None:
            row = admin.execute(
                "SELECT wait_event FROM pg_stat_activity WHERE application_name = 'test-stalled'"
            ).fetchone()
            return None if row is None else str(row[0])

        def reading() -> bool:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'test-stalled'"
                " AND state = 'active' AND query LIKE 'SELECT repeat%'"
            ).fetchone()
            return bool(row and row[0])

        wait_until(reading, 15, "the reader's query under way")
        reader.send_signal(signal.SIGSTOP)
        wait_until(lambda: state() == "ClientWrite", 15, "the server blocked writing to it")
        wait_until(lambda: state() is None, 20, "the server to drop the stalled session")
    finally:
        reader.kill()
        reader.wait(10)


def test_maintenance_statements_get_their_own_bound(postgres_url: str) -> None:
    """Statistics and counts over every task may outlast the session's
    statement timeout, up to the maintenance bound; a session without a
    statement timeout is never given one."""
    bounds = SessionBounds(
        statement_timeout=timedelta(seconds=1), maintenance_timeout=timedelta(seconds=10)
    )
    store = SQLAlchemyStore.from_url(postgres_url, bounds=bounds)
    unbounded = SQLAlchemyStore.from_url(postgres_url, role="cli")
    try:
        with pytest.raises(StatementTimeout), store._read("sleep") as conn:
            conn.exec_driver_sql("SELECT pg_sleep(1.5)")
        with store._read("sleep") as conn:
            store._maintenance(conn)
            conn.exec_driver_sql("SELECT pg_sleep(1.5)")
        with unbounded._read("show") as conn:
            unbounded._maintenance(conn)
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "0"
    finally:
        store.close()
        unbounded.close()


def test_a_migration_runs_without_the_urls_statement_timeout(postgres_server: str) -> None:
    """``db upgrade`` is not cut by a statement timeout, whatever the URL
    says: here its last step waits 1.5 s for a lock, with 1 s in the URL."""
    name = f"swh_bounds_migrate_{int(time.time() * 1000)}"
    url = services.create_empty_database(postgres_server, name)
    engine = make_engine(f"{url}?options=-c%20statement_timeout%3D1s", role="cli")
    try:
        migrations.upgrade(engine, "0009")
        with (
            psycopg.connect(libpq(url), autocommit=True) as watcher,
            psycopg.connect(libpq(url)) as holder,
        ):
            holder.execute("LOCK TABLE task_type IN ACCESS SHARE MODE")
            thread, outcome = in_thread(lambda: migrations.upgrade(engine))

            def over_or_waited() -> bool:
                waited = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND"
                    " wait_event_type = 'Lock' AND now() - query_start > interval '1.5 s'",
                    (services.prefixed(name),),
                ).fetchone()
                return not thread.is_alive() or bool(waited and waited[0])

            wait_until(over_or_waited, 30, "the migration to wait on the lock")
            holder.rollback()
            thread.join(timeout=30)
        assert "error" not in outcome, outcome
        assert migrations.current_revision(engine) == migrations.head_revision()
    finally:
        engine.dispose()
        services.drop_database(postgres_server, name)


def test_a_mistyped_url_setting_is_refused_before_connecting(postgres_url: str) -> None:
    with pytest.raises(Exception, match="keepalives_idle") as refused:
        make_engine(f"{postgres_url}?keepalives_idle=soon")
    assert "db-url" in str(refused.value)
