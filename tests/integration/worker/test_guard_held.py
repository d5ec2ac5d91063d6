"""The start guard's held connections (store/sql_held.py), on PostgreSQL:
one session per thread outside the pool, a session killed under it fails
one start (the store's error) and the next start reconnects, a forked
process never shares its parent's session, and closing the store ends them."""

from __future__ import annotations

import multiprocessing
import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from swh_like_scheduler.domain.exceptions import StoreUnavailable
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskRun, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = pytest.mark.postgresql


@pytest.fixture
def store(pg_store: SQLAlchemyStore) -> SQLAlchemyStore:
    pg_store.create_task_type(
        TaskType(type="plain", backend_name="tests.held", default_interval=timedelta(hours=1))
    )
    return pg_store


def dispatched(store: SQLAlchemyStore, count: int) -> list[TaskRun]:
    now = datetime.now(UTC) - timedelta(minutes=1)
    tasks = store.create_tasks(
        [
            Task(
                type="plain",
                args=(n,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=now,
                deadline=now + timedelta(seconds=1),
            )
            for n in range(count)
        ],
        now=now,
    )
    return [store.schedule_task_run(t.id or 0, now=now) for t in tasks]


def sessions(store: SQLAlchemyStore, admin: psycopg.Connection) -> list[int]:
    """The server sessions on the store's database, but the admin's own."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        (store.engine.url.database,),
    ).fetchall()
    return sorted(r[0] for r in rows)


def settled(store: SQLAlchemyStore, admin: psycopg.Connection) -> list[int]:
    """The sessions once those just closed have left the view (a backend
    shows in pg_stat_activity for a moment after its client hung up)."""
    deadline = time.monotonic() + 10
    while sessions(store, admin) and time.monotonic() < deadline:
        time.sleep(0.05)
    return sessions(store, admin)


@pytest.fixture
def admin(store: SQLAlchemyStore) -> psycopg.Connection:
    url = store.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


def start(store: SQLAlchemyStore, run: TaskRun, who: str = "w") -> bool:
    return store.guard_start(run.backend_id, node="n", name=who, tag=run.backend_id).granted


def test_one_session_per_thread_outside_the_pool_ended_by_close(
    store: SQLAlchemyStore, admin: psycopg.Connection
) -> None:
    runs = dispatched(store, 12)
    store.engine.dispose()  # the set-up's pooled sessions gone
    before = settled(store, admin)
    assert all(start(store, run) for run in runs[:6])
    assert store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    after_one = sessions(store, admin)
    assert len(after_one) == len(before) + 1  # six starts, one session
    granted: list[bool] = []
    thread = threading.Thread(target=lambda: granted.extend(start(store, r) for r in runs[6:]))
    thread.start()
    thread.join(30)
    assert granted == [True] * 6
    assert len(sessions(store, admin)) == len(before) + 2  # a second thread, a second one
    store.close()
    assert settled(store, admin) == []


def test_a_killed_session_fails_one_start_then_the_next_reconnects(
    store: SQLAlchemyStore, admin: psycopg.Connection
) -> None:
    first, second, third = dispatched(store, 3)
    store.engine.dispose()
    assert start(store, first)
    [held] = sessions(store, admin)
    admin.execute("SELECT pg_terminate_backend(%s)", (held,))
    with pytest.raises(StoreUnavailable, match="guard the start of a run"):
        start(store, second)
    run = store.get_task_run(second.backend_id)
    assert run is not None and run.status.value == "scheduled"  # nothing written
    assert start(store, second) and start(store, third)


def _start_in_child(store: SQLAlchemyStore, run: TaskRun, out: multiprocessing.Queue) -> None:
    try:
        out.put(start(store, run, who="child"))
    except Exception as error:
        out.put(repr(error))


def test_a_forked_process_uses_a_session_of_its_own(
    store: SQLAlchemyStore, admin: psycopg.Connection
) -> None:
    mine, childs, later = dispatched(store, 3)
    assert start(store, mine)
    context = multiprocessing.get_context("fork")
    out: multiprocessing.Queue = context.Queue()
    child = context.Process(target=_start_in_child, args=(store, childs, out))
    child.start()
    assert out.get(timeout=30) is True
    child.join(30)
    assert child.exitcode == 0
    # the parent's session was neither used nor closed by the child
    assert start(store, later)
    run = store.get_task_run(childs.backend_id)
    assert run is not None and run.worker == "child@n"
