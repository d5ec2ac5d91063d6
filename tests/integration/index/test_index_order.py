"""The index hands tasks out in the database's order (class, then
deadline), whatever its backlog of matured entries, and a ready task it
lacks goes out as soon as the database's order reaches it."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import pytest
import redis
import services
from celery import Celery
from indextest import T0, H, S, new_type, runner_app, task

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import Priority, ScheduleKind, Task, TaskType
from swh_like_scheduler.index import IndexedStore, RedisIndex, rebuild
from swh_like_scheduler.index.keeper import READY_CHECK, IndexKeeper
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.redis]


def test_a_claim_matures_every_entry_before_it_pops(index: RedisIndex) -> None:
    """An old backlog of low-class entries (matured long ago) and newer
    high-class ones: the claim hands out the high class first, and the low
    class by deadline, however many slices maturing the backlog takes."""
    index.reset("crawl", now=T0)
    low = [
        task(n, next_run=T0 - 2 * H + n * S, deadline=T0 + ((n * 7919) % 3000) * S, priority="low")
        for n in range(1, 3001)
    ]
    high = [
        task(n, next_run=T0 - H + (n - 5000) * S, deadline=T0 + 2 * H - n * S, priority="high")
        for n in range(5001, 5101)
    ]
    index.put("crawl", [*low, *high])
    first = index.claim("crawl", now=T0, limit=150, moves=500)  # 7 slices of 500
    assert first is not None
    assert first[:100] == [t.id for t in sorted(high, key=lambda t: t.deadline)]
    by_deadline = [t.id for t in sorted(low, key=lambda t: t.deadline)]
    assert first[100:] == by_deadline[:50]
    rest = index.claim("crawl", now=T0, limit=5000, moves=500)
    assert rest == by_deadline[50:]
    assert index.sizes("crawl") == {"wait": 0, "ready": 0, "claimed": 3100}


def test_entries_the_index_would_not_hand_out_are_found(index: RedisIndex) -> None:
    index.reset("crawl", now=T0)
    index.put(
        "crawl",
        [
            task(1, next_run=T0 - H, deadline=T0),  # matured in wait
            task(2, next_run=T0 - H, deadline=T0 + H),  # to be moved to ready
            task(3, next_run=T0 + H, deadline=T0 + H),  # wait, later than the database says
            task(4, next_run=T0 - H, deadline=T0 + 2 * H),  # to be claimed
        ],
    )
    assert index.claim("crawl", now=T0, limit=1) == [1]
    assert index.claim("crawl", now=T0, limit=1) == [2]
    # 1 and 2 in claimed, 4 in ready, 3 in wait at T0 + H, 5 nowhere
    assert index.lacking("crawl", [1, 2, 3, 4, 5], now=T0) == [3, 5]
    assert index.lacking("crawl", [3], now=T0 + H) == []
    index.invalidate("crawl")
    assert index.lacking("crawl", [5], now=T0) is None


# -- with the database and a runner ---------------------------------------------


def spec(
    task_type: TaskType, n: int, *, next_run: datetime, deadline: datetime, priority: str
) -> Task:
    return Task(
        type=task_type.type,
        args=(n,),
        schedule_kind=ScheduleKind.ADAPTIVE,
        current_interval=H,
        priority=Priority(priority),
        next_run=next_run,
        deadline=deadline,
    )


def published(pg_store: SQLAlchemyStore, queue: str) -> list[int]:
    """The first argument of each task in ``queue``, in the order a worker
    receives them (kombu pushes on the left, workers pop on the right);
    the queue is emptied."""
    client = redis.Redis.from_url(services.redis_url())
    try:
        backend_ids = [
            json.loads(e)["headers"]["id"] for e in reversed(client.lrange(queue, 0, -1))
        ]
        client.delete(queue)
    finally:
        client.close()
    with pg_store.engine.connect() as conn:
        args = dict(
            conn.exec_driver_sql(
                "SELECT r.backend_id, t.arguments FROM task_run r JOIN task t"
                " ON t.id = r.task_id WHERE r.backend_id = ANY(%(ids)s)",
                {"ids": backend_ids},
            ).all()
        )
    return [int(_first(args[b])) for b in backend_ids]


def _first(arguments: object) -> object:
    data = json.loads(arguments) if isinstance(arguments, str | bytes) else arguments
    assert isinstance(data, dict), data
    return data["args"][0]


def indexed(pg_store: SQLAlchemyStore, index: RedisIndex) -> tuple[IndexedStore, IndexKeeper]:
    store = IndexedStore(pg_store, index)
    return store, IndexKeeper(index, store, background=False)  # type: ignore[arg-type]


def drain(
    store: object, app: Celery, pg_store: SQLAlchemyStore, task_type: TaskType, now: datetime
) -> list[list[int]]:
    """Pass after pass at ``now`` until nothing is left: what each published."""
    passes: list[list[int]] = []
    while True:
        kwargs = {"index": store} if isinstance(store, IndexKeeper) else {}
        target = store.store if isinstance(store, IndexKeeper) else store
        report = tick(target, app, now, types=[task_type.type], **kwargs)  # type: ignore[arg-type]
        got = published(pg_store, task_type.effective_queue)
        assert len(got) == report.published
        if not got:
            return passes
        passes.append(got)
        assert len(passes) < 100


@pytest.mark.postgresql
def test_an_old_low_backlog_does_not_hold_back_new_high_tasks(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> None:
    """3,000 low-class tasks ready for two hours, then 100 high-class ones:
    the first pass (room for 100) publishes the 100 high ones."""
    app = runner_app()
    store, keeper = indexed(pg_store, index)
    task_type = new_type(pg_store, 100)
    now = datetime.now(tz=UTC)
    assert rebuild(index, store, task_type.type) == 0  # type: ignore[arg-type]
    backlog = [
        spec(task_type, n, next_run=now - 2 * H + n * S, deadline=now + n * S, priority="low")
        for n in range(3000)
    ]
    store.create_tasks(backlog, now=now)
    fresh = [
        spec(task_type, 10_000 + n, next_run=now - H, deadline=now + H, priority="high")
        for n in range(100)
    ]
    store.create_tasks(fresh, now=now)
    first = drain(keeper, app, pg_store, task_type, now)[0]
    assert sorted(first) == list(range(10_000, 10_100))


@pytest.mark.postgresql
def test_the_index_publishes_in_the_order_of_the_database(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> None:
    """The same mixed backlog (three classes, can_start_by and deadlines
    shuffled) in two types at the same instant, one dispatched through the
    index and one from the database, 100 a pass: the same tasks in the same
    order, pass after pass."""
    app = runner_app()
    store, keeper = indexed(pg_store, index)
    now = datetime.now(tz=UTC)
    draw = random.Random(35)
    count = 1500
    starts = draw.sample(range(1, 4 * 3600), count)
    deadlines = draw.sample(range(-3600, 3600), count)
    classes = [draw.choice(["high", "normal", "low"]) for _ in range(count)]

    def backlog(task_type: TaskType) -> list[Task]:
        return [
            spec(
                task_type,
                n,
                next_run=now - starts[n] * S,
                deadline=now + deadlines[n] * S,
                priority=classes[n],
            )
            for n in range(count)
        ]

    plain, through = new_type(pg_store, 100), new_type(pg_store, 100)
    assert rebuild(index, store, through.type) == 0  # type: ignore[arg-type]
    pg_store.create_tasks(backlog(plain), now=now)
    store.create_tasks(backlog(through), now=now)
    expected = drain(pg_store, app, pg_store, plain, now)
    assert [len(p) for p in expected] == [100] * 15
    assert drain(keeper, app, pg_store, through, now) == expected
    assert keeper.drifted == 0


@pytest.mark.postgresql
def test_ready_tasks_written_without_the_index_go_out_in_the_first_round(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> None:
    """10,000 ready tasks through the index, then 1,000 written by a process
    not given its URL, with the earliest deadlines: the next pass (room for
    1,000) publishes those 1,000 (the Redis index guide's bound: a ready task with r
    ready tasks ahead of it goes out within r // READY_CHECK + 1 rounds)."""
    assert READY_CHECK >= 1000
    app = runner_app()
    store, keeper = indexed(pg_store, index)
    task_type = new_type(pg_store, 1000)
    now = datetime.now(tz=UTC)
    assert rebuild(index, store, task_type.type) == 0  # type: ignore[arg-type]
    store.create_tasks(
        [
            spec(task_type, n, next_run=now - H, deadline=now + n * S, priority="normal")
            for n in range(10_000)
        ],
        now=now,
    )
    unseen = [
        spec(task_type, 20_000 + n, next_run=now - H, deadline=now - H, priority="normal")
        for n in range(1000)
    ]
    pg_store.create_tasks(unseen, now=now)  # not filed in the index
    report = tick(store, app, now, types=[task_type.type], index=keeper)  # type: ignore[arg-type]
    assert report.published == 1000
    assert sorted(published(pg_store, task_type.effective_queue)) == list(range(20_000, 21_000))
    assert keeper.drifted == 1000
    assert index.sizes(task_type.type)["ready"] == 10_000
