"""The Redis index against a real Redis (and PostgreSQL and a Redis broker
for the runner): claim order, maturation, stuck claims, rebuilds, and a
runner that dispatches every ready task once whatever the index says."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis
import services
import sqlalchemy as sa
from celery import Celery
from indextest import T0, H, S, new_type, runner_app, task

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import Priority, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.index import CLAIM_TIMEOUT, IndexedStore, RedisIndex, drift, rebuild
from swh_like_scheduler.index.keeper import HOLD_MARGIN, IndexKeeper
from swh_like_scheduler.monitor.duties import MonitorSettings, monitor_tick, release
from swh_like_scheduler.store import SQLAlchemyStore, make_engine
from swh_like_scheduler.store.tables import task as task_t

pytestmark = [pytest.mark.redis]


def complete(index: RedisIndex, task_type: str) -> None:
    index.reset(task_type, now=T0)


def test_claims_follow_class_then_deadline_and_only_ready_tasks(index: RedisIndex) -> None:
    complete(index, "crawl")
    index.put(
        "crawl",
        [
            task(1, next_run=T0 - H, deadline=T0 + 3 * H),
            task(2, next_run=T0 - H, deadline=T0 + H),
            task(3, next_run=T0 - H, deadline=T0 + 9 * H, priority="high"),
            task(4, next_run=T0 + H, deadline=T0),  # not ready yet
            task(5, next_run=T0 - H, deadline=T0 - H, priority="low"),
        ],
    )
    assert index.claim("crawl", now=T0, limit=2) == [3, 2]
    assert index.claim("crawl", now=T0, limit=10) == [1, 5]
    assert index.claim("crawl", now=T0, limit=10) == []
    # task 4 matures an hour later
    assert index.claim("crawl", now=T0 + H, limit=10) == [4]
    assert index.sizes("crawl") == {"wait": 0, "ready": 0, "claimed": 5}
    # only the classes asked for
    index.put("crawl", [task(6, next_run=T0, deadline=T0, priority="low")])
    assert index.claim("crawl", now=T0, limit=10, priorities=[Priority.HIGH]) == []
    assert index.claim("crawl", now=T0, limit=10, priorities=[Priority.LOW]) == [6]


def test_a_claim_not_settled_in_time_comes_back(index: RedisIndex) -> None:
    complete(index, "crawl")
    index.put("crawl", [task(n, next_run=T0, deadline=T0 + n * H) for n in (1, 2, 3)])
    assert index.claim("crawl", now=T0, limit=3) == [1, 2, 3]
    index.remove("crawl", [1])  # the database took it
    assert index.stuck("crawl", now=T0 + CLAIM_TIMEOUT / 2) == []
    assert sorted(index.stuck("crawl", now=T0 + 2 * CLAIM_TIMEOUT)) == [2, 3]
    assert index.sizes("crawl")["claimed"] == 0


def test_filing_a_task_that_no_longer_waits_takes_it_out(index: RedisIndex) -> None:
    complete(index, "crawl")
    index.put("crawl", [task(1, next_run=T0, deadline=T0)])
    index.put("crawl", [task(1, next_run=T0, deadline=T0).updated(status=TaskStatus.DISABLED)])
    assert index.claim("crawl", now=T0, limit=5) == []
    # filed again at a later time: not ready before it
    index.put("crawl", [task(1, next_run=T0 + H, deadline=T0 + 2 * H)])
    assert index.claim("crawl", now=T0, limit=5) == []
    assert index.claim("crawl", now=T0 + H, limit=5) == [1]


def test_an_index_is_used_only_once_complete(index: RedisIndex) -> None:
    index.put("crawl", [task(1, next_run=T0, deadline=T0)])
    assert index.claim("crawl", now=T0, limit=5) is None  # never built
    first = index.rebuild_step("crawl", now=T0, first="0 -")
    assert (first.kind, first.value) == ("cursor", "0 -")
    assert index.claim("crawl", now=T0, limit=5) is None  # being built
    # another process joining while the cursor is held is told to wait
    assert index.rebuild_step("crawl", now=T0, first="0 -").kind == "busy"
    # emptied while it was being built (FLUSHALL, a restart): not trusted,
    # and the next process to join begins anew
    index.client.delete(*index.keys("crawl").all())
    assert not index.rebuild_advance(
        "crawl", first.token, now=T0, cursor="0 -", next_cursor="end", page=None
    )
    again = index.rebuild_step("crawl", now=T0, first="0 -")
    assert again.kind == "cursor" and again.token != first.token
    assert index.claim("crawl", now=T0, limit=5) is None
    complete(index, "crawl")
    index.put("crawl", [task(1, next_run=T0, deadline=T0)])
    assert index.claim("crawl", now=T0, limit=5) == [1]
    index.invalidate("crawl")
    assert index.claim("crawl", now=T0, limit=5) is None


# -- with the database and a runner ---------------------------------------------


def ready(task_type: TaskType, count: int, now: datetime) -> list[Task]:
    return [
        Task(
            type=task_type.type,
            args=(n,),
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=H,
            next_run=now - H,
            deadline=now + timedelta(seconds=(n * 7919) % count),
        )
        for n in range(count)
    ]


def open_runs(store: SQLAlchemyStore, task_type: str) -> list[int]:
    import sqlalchemy as sa

    from swh_like_scheduler.store.tables import task as task_t
    from swh_like_scheduler.store.tables import task_run

    query = (
        sa.select(task_run.c.task_id)
        .join(task_t, task_t.c.id == task_run.c.task_id)
        .where(task_t.c.type == task_type)
    )
    with store.engine.connect() as conn:
        return list(conn.scalars(query))


def indexed_runner(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> tuple[Celery, IndexedStore, IndexKeeper, TaskType]:
    """A runner's app, its store kept in line with ``index``, its keeper
    (rebuilds at once) and a new task type."""
    store = IndexedStore(pg_store, index)
    keeper = IndexKeeper(index, store, background=False)  # type: ignore[arg-type]
    return runner_app(), store, keeper, new_type(pg_store)


@pytest.mark.postgresql
def test_a_runner_with_the_index_dispatches_each_ready_task_once(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> None:
    app, store, keeper, task_type = indexed_runner(pg_store, index)
    now = datetime.now(tz=UTC)
    queue = task_type.effective_queue
    created = store.create_tasks(ready(task_type, 300, now), now=now)
    ids = [t.id or 0 for t in created]
    try:
        # never built: this pass claims from the database and builds the index
        first = tick(store, app, now, types=[task_type.type], index=keeper)  # type: ignore[arg-type]
        assert first.published == 300
        assert index.is_complete(task_type.type)
        assert sorted(open_runs(pg_store, task_type.type)) == sorted(ids)
        # 100 more tasks, filed by their creation
        more = store.create_tasks(ready(task_type, 400, now)[300:], now=now)
        # one filed at the wrong time by hand: made stale (the database says disabled)
        stale = more[0]
        store.disable_tasks([stale.id or 0], now=now)
        index.put(task_type.type, [stale])
        # one the index lost
        lost = more[1]
        index.remove(task_type.type, [lost.id or 0])
        second = tick(store, app, now, types=[task_type.type], index=keeper)  # type: ignore[arg-type]
        assert second.published == 99
        runs = open_runs(pg_store, task_type.type)
        assert len(runs) == len(set(runs)) == 399
        assert stale.id not in runs and lost.id in runs
        assert queue_depth(app, queue) == 399  # the broker's own count
        assert index.sizes(task_type.type) == {"wait": 0, "ready": 0, "claimed": 0}
        assert keeper.repaired == 1  # the stale entry, filed again (out)
        assert keeper.drifted == 1  # the lost one, found by the pass's sweep
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)


@pytest.mark.postgresql
def test_tasks_the_database_refuses_do_not_hold_back_the_others(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> None:
    app, store, keeper, task_type = indexed_runner(pg_store, index)
    pg_store.update_task_type(task_type.type, max_queue_length=20)
    now = datetime.now(tz=UTC)
    queue = task_type.effective_queue
    types = [task_type.type]
    # 30 tasks that may not run on node "n1", with the earliest deadlines:
    # the runner knows no live worker, so the database never lets them go
    banned = store.create_tasks(
        [
            t.updated(args=("banned", n), dont_run_on_nodes=("n1",), deadline=now - H)
            for n, t in enumerate(ready(task_type, 30, now))
        ],
        now=now,
    )
    others = store.create_tasks(ready(task_type, 100, now), now=now)
    try:
        published = []
        for _ in range(4):
            with app.connection_for_write() as conn:
                conn.default_channel.queue_purge(queue)
            report = tick(store, app, now, types=types, index=keeper)  # type: ignore[arg-type]
            published.append(report.published)
            assert queue_depth(app, queue) == report.published  # the broker's count
        # the first pass claims from the database (and builds the index);
        # the next ones take the index's ids, the banned ones first: refused,
        # they leave room to the others, taken from the database
        assert published == [20, 20, 20, 20]
        runs = open_runs(pg_store, task_type.type)
        assert len(runs) == len(set(runs)) == 80
        assert set(runs) <= {t.id for t in others}
        # refused, not lost: their claims time out and they are filed again
        keeper.return_stuck(task_type.type, now=now + 2 * CLAIM_TIMEOUT)
        assert index.sizes(task_type.type)["claimed"] == 0
        offered = index.claim(task_type.type, now=now, limit=100) or []
        assert {t.id for t in banned} <= set(offered)
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)


@pytest.mark.postgresql
def test_the_monitor_files_again_the_stuck_claims_of_every_type(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> None:
    store = IndexedStore(pg_store, index)
    keeper = IndexKeeper(index, store, background=False)  # type: ignore[arg-type]
    task_type = new_type(pg_store)
    now = datetime.now(tz=UTC)
    assert rebuild(index, store, task_type.type) == 0  # type: ignore[arg-type]
    store.create_tasks(ready(task_type, 10, now), now=now)  # filed as they are created
    # a runner took them from the index, then died before claiming them
    assert len(index.claim(task_type.type, now=now, limit=10) or []) == 10
    settings = MonitorSettings(holder=f"monitor-{uuid.uuid4().hex[:6]}")
    early = monitor_tick(store, now, settings=settings, index=keeper)  # type: ignore[arg-type]
    assert early.index_unstuck == 0
    late = monitor_tick(  # no runner dispatches the type: the monitor files them
        store,  # type: ignore[arg-type]
        now + 2 * CLAIM_TIMEOUT,
        settings=settings,
        index=keeper,
    )
    assert late.index_unstuck == 10
    assert "10 stuck index claim(s) filed again" in late.summary()
    assert index.sizes(task_type.type) == {"wait": 10, "ready": 0, "claimed": 0}
    release(pg_store, settings)


@pytest.mark.postgresql
def test_stuck_claims_and_drift_are_repaired_from_the_database(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> None:
    app, store, keeper, task_type = indexed_runner(pg_store, index)
    now = datetime.now(tz=UTC)
    queue = task_type.effective_queue
    assert rebuild(index, store, task_type.type) == 0  # type: ignore[arg-type]
    created = store.create_tasks(ready(task_type, 50, now), now=now)
    try:
        # a runner took 20 from the index, then died before claiming them
        assert len(index.claim(task_type.type, now=now, limit=20) or []) == 20
        # drift: ten entries lost, five filed at another time
        index.remove(task_type.type, [t.id or 0 for t in created[20:30]])
        index.put(task_type.type, [t.updated(next_run=now + 9 * H) for t in created[30:35]])
        found = drift(index, store, task_type.type)  # type: ignore[arg-type]
        assert (found.checked, found.missing, found.wrong) == (50, 10, 5)
        assert drift(index, store, task_type.type).missing == 0  # type: ignore[arg-type]
        later = now + 2 * CLAIM_TIMEOUT
        report = tick(store, app, later, types=[task_type.type], index=keeper)  # type: ignore[arg-type]
        assert report.published == 50
        runs = open_runs(pg_store, task_type.type)
        assert sorted(runs) == sorted(t.id for t in created)
        assert queue_depth(app, queue) == 50
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)


@pytest.mark.postgresql
def test_the_command_line_builds_checks_and_dispatches_through_the_index(
    pg_store: SQLAlchemyStore, postgres_url: str
) -> None:
    import json

    from click.testing import CliRunner

    from swh_like_scheduler.cli import swh

    redis_url = services.redis_url()
    app = runner_app()
    task_type = new_type(pg_store)
    now = datetime.now(tz=UTC)
    pg_store.create_tasks(ready(task_type, 120, now), now=now)  # written without the index
    base = ["scheduler", "--db-url", postgres_url, "--index-url", redis_url, "index"]
    only = ["-t", task_type.type]

    def run(*args: str) -> str:
        result = CliRunner().invoke(swh, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    try:
        status = json.loads(run(*base, "status", *only, "--json"))[task_type.type]
        assert status["complete"] is False
        assert run(*base, "rebuild", *only).strip() == f"{task_type.type}: 120 waiting tasks filed"
        rebuilt = json.loads(run(*base, "rebuild", *only, "--json"))
        assert rebuilt == {task_type.type: {"rebuilt": True, "filed": 120}}
        status = json.loads(run(*base, "status", *only, "--json"))[task_type.type]
        assert status == {"complete": True, "wait": 120, "ready": 0, "claimed": 0}
        assert json.loads(run(*base, "check", *only, "--json"))[task_type.type] == {
            "complete": True,
            "checked": 120,
            "missing": 0,
            "wrong": 0,
            "stray": 0,
        }
        runner = ["scheduler", "--db-url", postgres_url, "--index-url", redis_url]
        output = run(
            *runner,
            "start-runner",
            "--once",
            "-t",
            task_type.type,
            "--broker-url",
            redis_url,
            "--no-monitor",
        )
        assert f"{task_type.type}: depth 0 capacity 10000 claimed 120 published 120" in output
        assert queue_depth(app, task_type.effective_queue) == 120
        status = json.loads(run(*base, "status", *only, "--json"))[task_type.type]
        assert status == {"complete": True, "wait": 0, "ready": 0, "claimed": 0}
        # a bad URL is refused by name, before anything runs
        bad = CliRunner().invoke(
            swh,
            ["scheduler", "--db-url", postgres_url, "--index-url", "http://x", "index", "status"],
        )
        assert bad.exit_code != 0 and "index_url" in bad.output
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(task_type.effective_queue)
        index = RedisIndex(redis.Redis.from_url(redis_url))
        index.client.delete(*index.keys(task_type.type).all())


@pytest.mark.postgresql
def test_an_expired_one_shot_task_leaves_the_index(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> None:
    store = IndexedStore(pg_store, index)
    task_type = new_type(pg_store)
    now = datetime.now(tz=UTC)
    [task] = store.create_tasks(
        [
            Task(
                type=task_type.type,
                args=(1,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=now - 2 * H,
                deadline=now - 2 * H,
                max_delay=timedelta(0),
            )
        ],
        now=now - 2 * H,
    )
    store.record_room(task_type.type, at=now - H)
    assert rebuild(index, store, task_type.type) == 1  # type: ignore[arg-type]
    assert index.sizes(task_type.type)["wait"] == 1
    [expiry] = store.expire_oneshot_tasks(now=now)
    assert expiry.task.id == task.id and expiry.task.status is TaskStatus.DISABLED
    assert index.sizes(task_type.type) == {"wait": 0, "ready": 0, "claimed": 0}
    assert index.claim(task_type.type, now=now, limit=10) == []


@pytest.mark.postgresql
def test_one_shots_held_while_a_runner_claims_from_the_index_do_not_expire(
    pg_store: SQLAlchemyStore, index: RedisIndex, postgres_url: str
) -> None:
    """The index path records room as the database path does: a pass
    whose ids came from the index, and whose database claims skipped rows
    another transaction held, had no room for them."""
    app, store, keeper, task_type = indexed_runner(pg_store, index)
    kind = [task_type.type]
    store.create_tasks(ready(task_type, 1, datetime.now(tz=UTC)), now=datetime.now(tz=UTC))
    holder = make_engine(postgres_url)
    settings = MonitorSettings(oneshot_expiry_grace=timedelta(0), holder="m")
    try:
        first = tick(store, app, datetime.now(tz=UTC), types=kind, index=keeper)  # type: ignore[arg-type]
        assert first.claimed == 1 and index.is_complete(task_type.type)
        now = datetime.now(tz=UTC)
        late = [
            Task(
                type=task_type.type,
                args=(n,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=now - H,
                deadline=now - H + S,
                max_delay=S,
            )
            for n in range(10)
        ]
        ids = [t.id or 0 for t in store.create_tasks(late, now=now)]
        assert index.sizes(task_type.type)["ready"] + index.sizes(task_type.type)["wait"] == 10
        with holder.connect() as conn:
            conn.execute(sa.select(task_t.c.id).where(task_t.c.id.in_(ids)).with_for_update())
            held = tick(store, app, datetime.now(tz=UTC), types=kind, index=keeper)  # type: ignore[arg-type]
            assert held.claimed == 0 and held.errors == ()
            conn.rollback()
        report = monitor_tick(store, datetime.now(tz=UTC), settings=settings, index=keeper)  # type: ignore[arg-type]
        assert report.expired == ()
        again = tick(store, app, datetime.now(tz=UTC), types=kind, index=keeper)  # type: ignore[arg-type]
        assert again.claimed == 10
        assert sorted(open_runs(pg_store, task_type.type))[1:] == sorted(ids)
    finally:
        holder.dispose()
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(task_type.effective_queue)


@pytest.mark.postgresql
def test_a_round_left_by_a_killed_runner_comes_back_after_the_claim_time_limit(
    pg_store: SQLAlchemyStore, index: RedisIndex
) -> None:
    """Ids taken from the index by a runner killed before its database
    claim come back once that claim could no longer be running (its time
    limit and a margin: 35 s), not after 60 s; ids the database refused
    although ready stay parked for 60 s."""
    store = IndexedStore(pg_store, index)
    keeper = IndexKeeper(index, store, background=False)  # type: ignore[arg-type]
    assert keeper.hold == pg_store.claim_timeout + HOLD_MARGIN < CLAIM_TIMEOUT
    task_type = new_type(pg_store)
    now = datetime.now(tz=UTC)
    assert rebuild(index, store, task_type.type) == 0  # type: ignore[arg-type]
    created = store.create_tasks(ready(task_type, 30, now), now=now)
    # a runner took 20 from the index, then was killed
    taken = keeper.claim(task_type.type, now=now, limit=20, priorities=None) or []
    assert len(taken) == 20
    # 5 more offered to a claim that the database refused (another runner
    # was claiming them, say): parked
    offered = keeper.claim(task_type.type, now=now, limit=5, priorities=None) or []
    keeper.settle(task_type.type, offered, set(), now=now)
    assert index.sizes(task_type.type)["claimed"] == 25
    assert keeper.return_stuck(task_type.type, now=now + keeper.hold / 2) == 0
    assert keeper.return_stuck(task_type.type, now=now + keeper.hold) == 20
    assert index.sizes(task_type.type)["claimed"] == 5
    assert keeper.return_stuck(task_type.type, now=now + CLAIM_TIMEOUT) == 5
    again = index.claim(task_type.type, now=now, limit=100) or []
    assert sorted(again) == sorted(t.id for t in created)
