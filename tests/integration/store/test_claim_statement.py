"""The one-statement PostgreSQL claim: same ids as Python, same order
whichever way the ready tasks are read, and the bounded way when few are due."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from swh_like_scheduler.domain.model import (
    Priority,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
    run_backend_id,
)
from swh_like_scheduler.store import SQLAlchemyStore, sql_runs
from swh_like_scheduler.store.sql_identity import run_namespace_of

pytestmark = pytest.mark.postgresql


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore.from_url(postgres_url)
    store.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
    yield store
    store.close()


def oneshot(n: int, at: datetime, deadline_offset: timedelta, priority: Priority) -> Task:
    return Task(
        type="crawl",
        args=(n,),
        schedule_kind=ScheduleKind.ONESHOT,
        next_run=at,
        deadline=at + deadline_offset,
        priority=priority,
    )


def test_backend_ids_computed_in_sql_equal_python(pg_store: SQLAlchemyStore) -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    slots = [
        datetime(1969, 7, 20, 20, 17, 40, 123456, tzinfo=UTC),  # before the epoch
        datetime(2026, 11, 21, 11, 59, 59, 999999, tzinfo=UTC),
        datetime(2000, 2, 29, 0, 0, tzinfo=UTC),
        now,
    ]
    pg_store.create_tasks(
        [oneshot(n, slot, timedelta(hours=1), Priority.NORMAL) for n, slot in enumerate(slots)],
        now=now,
    )
    claimed = pg_store.claim_ready_tasks("crawl", now=now, limit=10)
    assert len(claimed) == len(slots)
    namespace = run_namespace_of(pg_store.installation_id())
    for c in claimed:
        assert c.backend_id == run_backend_id(c.task_id, c.slot, namespace)
        assert c.backend_id[14] == "3" and c.backend_id[19] in "89ab"  # UUID version 3
    stored = {r.backend_id for c in claimed for r in pg_store.get_task_runs(c.task_id)}
    assert stored == {c.backend_id for c in claimed}


def test_run_backend_id_is_deterministic_per_task_and_slot() -> None:
    slot = datetime(2026, 1, 1, tzinfo=UTC)
    assert run_backend_id(1, slot) == run_backend_id(1, slot.astimezone())
    assert run_backend_id(1, slot) != run_backend_id(2, slot)
    assert run_backend_id(1, slot) != run_backend_id(1, slot + timedelta(microseconds=1))
    # two installations never give one id to their runs of one task id and slot
    mine, theirs = run_namespace_of("a" * 32), run_namespace_of("b" * 32)
    assert run_backend_id(1, slot, mine) != run_backend_id(1, slot, theirs)
    assert uuid.UUID(run_backend_id(1, slot, mine)).version == 3


def claim_all(store: SQLAlchemyStore, now: datetime, limit: int) -> list[int]:
    order: list[int] = []
    while batch := store.claim_ready_tasks("crawl", now=now, limit=limit):
        order.extend(c.task_id for c in batch)
    return order


def statements(store: SQLAlchemyStore) -> list[str]:
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])

    sa.event.listen(store.engine, "before_cursor_execute", record)
    return seen


@pytest.mark.parametrize("factor", [0, 10, 10_000], ids=["walk", "auto", "ready-set"])
def test_claims_follow_priority_then_deadline_whichever_way_they_read(
    pg_store: SQLAlchemyStore, factor: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """factor 0 always walks the dispatch order, 10 000 always reads the
    ready set, 10 switches as the ready tasks run out: the order is the same."""
    monkeypatch.setattr(sql_runs, "SPARSE_FACTOR", factor)
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    rng = random.Random(7)
    tasks = []
    for n in range(600):
        due = n % 3 != 0
        at = now - timedelta(minutes=rng.randrange(1, 600)) if due else now + timedelta(hours=1)
        priority = rng.choice(list(Priority))
        tasks.append(oneshot(n, at, timedelta(seconds=rng.randrange(0, 5000)), priority))
    created = pg_store.create_tasks(tasks, now=now)
    rank = {p: i for i, p in enumerate([Priority.HIGH, Priority.NORMAL, Priority.LOW])}
    due_tasks = [t for t in created if t.next_run <= now]
    # every claim of 25 takes the most urgent remaining tasks
    order = claim_all(pg_store, now, 25)
    by_id = {t.id: t for t in created}
    assert sorted(order) == sorted(t.id for t in due_tasks)
    for start in range(0, len(order), 25):
        chunk = [by_id[i] for i in order[start : start + 25]]
        keys = [(rank[t.priority], t.deadline, t.id) for t in chunk]
        assert keys == sorted(keys)
        remaining = [by_id[i] for i in order[start + 25 :]]
        if remaining:
            worst = max(keys)
            assert all((rank[t.priority], t.deadline, t.id) > worst for t in remaining)
    assert all(t.status is TaskStatus.SCHEDULED for t in pg_store.get_tasks(order))


def test_few_ready_tasks_are_read_from_the_ready_set(pg_store: SQLAlchemyStore) -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    later = [oneshot(n, now + timedelta(hours=1), timedelta(0), Priority.NORMAL) for n in range(50)]
    ready = [oneshot(n, now, timedelta(hours=1), Priority.NORMAL) for n in range(50, 60)]
    pg_store.create_tasks(later + ready, now=now)
    seen = statements(pg_store)
    assert len(pg_store.claim_ready_tasks("crawl", now=now, limit=5)) == 5
    claim = [s for s in seen if "picked_normal" in s]
    assert len(claim) == 1 and "due_normal" in claim[0]  # 5 ready < 5 x SPARSE_FACTOR


def test_many_ready_tasks_walk_the_dispatch_order(pg_store: SQLAlchemyStore) -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    pg_store.create_tasks(
        [oneshot(n, now, timedelta(seconds=n), Priority.NORMAL) for n in range(120)], now=now
    )
    seen = statements(pg_store)
    claimed = pg_store.claim_ready_tasks("crawl", now=now, limit=10)  # 120 ready >= 10 x 10
    assert [c.deadline for c in claimed] == sorted(c.deadline for c in claimed)
    claim = [s for s in seen if "picked_normal" in s]
    assert len(claim) == 1 and "due_normal" not in claim[0]


def test_claimed_times_are_utc_whatever_the_server_time_zone(postgres_url: str) -> None:
    """The claim's rows are read through the driver: the session's time zone
    is set to UTC, so a server in another zone changes nothing."""
    url = sa.make_url(postgres_url)
    admin = sa.create_engine(url.set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"ALTER DATABASE \"{url.database}\" SET TimeZone = 'Asia/Tokyo'")
    admin.dispose()
    store = SQLAlchemyStore.from_url(postgres_url)
    try:
        store.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
        now = datetime.now(tz=UTC)
        store.create_tasks(
            [oneshot(1, now - timedelta(minutes=5), timedelta(hours=1), Priority.NORMAL)], now=now
        )
        [claimed] = store.claim_ready_tasks("crawl", now=now, limit=1)
        assert claimed.slot.utcoffset() == timedelta(0) == claimed.deadline.utcoffset()
        assert claimed.slot == now - timedelta(minutes=5)
    finally:
        store.close()


def test_a_claim_refreshes_missing_statistics_first(pg_store: SQLAlchemyStore) -> None:
    """Tasks created without statistics (autovacuum off, as right after a
    bulk create_tasks): the first claim analyses the table, so its plan is
    made on what the table holds (without: a quadratic plan, 15 s at 10k)."""
    with pg_store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE task SET (autovacuum_enabled = false)")
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    for start in range(0, 3000, 1000):
        pg_store.create_tasks(
            [
                oneshot(n, now, timedelta(seconds=n), Priority.NORMAL)
                for n in range(start, start + 1000)
            ],
            now=now,
        )

    def reltuples() -> float:
        with pg_store.engine.connect() as conn:
            return float(
                conn.exec_driver_sql(
                    "SELECT reltuples FROM pg_class WHERE relname = 'task'"
                ).scalar_one()
            )

    assert reltuples() < 0  # never analysed
    claimed = pg_store.claim_ready_tasks("crawl", now=now, limit=100)
    assert [c.deadline for c in claimed] == sorted(c.deadline for c in claimed)
    assert len(claimed) == 100 and reltuples() == 3000


def test_the_sparse_claim_never_joins_the_ready_set_back(pg_store: SQLAlchemyStore) -> None:
    """The sparse path looks its first ids up by primary key: no join of the
    whole materialised ready set with the table (the quadratic plan)."""
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    pg_store.create_tasks(
        [oneshot(n, now, timedelta(0), Priority.NORMAL) for n in range(3)], now=now
    )
    seen = statements(pg_store)
    assert len(pg_store.claim_ready_tasks("crawl", now=now, limit=5)) == 3
    [claim] = [s for s in seen if "picked_normal" in s]
    assert "due_normal" in claim and "JOIN due_normal" not in claim
    assert "= ANY (coalesce((SELECT array_agg(first_normal.id)" in claim
