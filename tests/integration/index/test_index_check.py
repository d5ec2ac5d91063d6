"""``index check`` and ``index status`` tell the truth: entries of tasks no
longer waiting are found and taken out, an index being rebuilt (or
emptied) is not reported as drift, and a rebuild is said to be under way
only while a process works on it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import services
from click.testing import CliRunner
from indextest import H, new_type

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.index import IndexedStore, RedisIndex, drift, rebuild
from swh_like_scheduler.index.keeper import IndexKeeper
from swh_like_scheduler.index.redis_index import REBUILD_LEASE
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.redis, pytest.mark.postgresql]


def waiting(task_type: TaskType, count: int, now: datetime) -> list[Task]:
    return [
        Task(
            type=task_type.type,
            args=(n,),
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=H,
            next_run=now + H,
            deadline=now + 2 * H,
        )
        for n in range(count)
    ]


def cli(postgres_url: str, *args: str) -> str:
    """``swh scheduler index ARGS`` (the index under the default prefix)."""
    result = CliRunner().invoke(
        swh,
        [
            "scheduler",
            "--db-url",
            postgres_url,
            "--index-url",
            services.redis_url(),
            "index",
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def default_index(index: RedisIndex) -> RedisIndex:
    """The fixture's Redis under the default prefix, which the command line
    uses (the tests take out the keys of their own task types)."""
    return RedisIndex(index.client)


def test_check_removes_the_entries_of_tasks_no_longer_waiting(
    pg_store: SQLAlchemyStore, postgres_url: str, default_index: RedisIndex
) -> None:
    index = default_index
    store = IndexedStore(pg_store, index)
    task_type = new_type(pg_store)
    now = datetime.now(tz=UTC)
    try:
        assert rebuild(index, store, task_type.type) == 0  # type: ignore[arg-type]
        created = store.create_tasks(waiting(task_type, 50, now), now=now)
        ids = [t.id or 0 for t in created]
        # behind the index's back: 10 disabled, 5 deleted
        pg_store.disable_tasks(ids[:10], now=now)
        pg_store.delete_tasks(ids[10:15])
        assert index.sizes(task_type.type)["wait"] == 50
        found = json.loads(cli(postgres_url, "check", "-t", task_type.type, "--json"))
        assert found[task_type.type] == {
            "complete": True,
            "checked": 35,
            "missing": 0,
            "wrong": 0,
            "stray": 15,
        }
        assert index.sizes(task_type.type)["wait"] == 35
        text = cli(postgres_url, "check", "-t", task_type.type)
        assert "0 entries of tasks no longer waiting" in text
    finally:
        index.client.delete(*index.keys(task_type.type).all())


def test_an_emptied_index_is_not_reported_as_drift(
    pg_store: SQLAlchemyStore, postgres_url: str, default_index: RedisIndex
) -> None:
    """After a flush, the runners' sweep and ``index check`` do not count
    every waiting task as missing: the index is being rebuilt."""
    index = default_index
    store = IndexedStore(pg_store, index)
    keeper = IndexKeeper(index, store, background=False)  # type: ignore[arg-type]
    task_type = new_type(pg_store)
    now = datetime.now(tz=UTC)
    try:
        assert rebuild(index, store, task_type.type) == 0  # type: ignore[arg-type]
        store.create_tasks(waiting(task_type, 40, now), now=now)
        index.client.delete(*index.keys(task_type.type).all())  # FLUSHALL, for this type
        assert drift(index, store, task_type.type).complete is False  # type: ignore[arg-type]
        keeper.sweep(task_type.type)
        assert keeper.drifted == 0
        found = json.loads(cli(postgres_url, "check", "-t", task_type.type, "--json"))
        assert found[task_type.type] == {"complete": False}
        assert "not checked: the index is not complete" in cli(
            postgres_url, "check", "-t", task_type.type
        )
        # nothing was filed by the check: the index is still empty
        assert index.sizes(task_type.type) == {"wait": 0, "ready": 0, "claimed": 0}
    finally:
        index.client.delete(*index.keys(task_type.type).all())


def test_status_says_whether_a_rebuild_is_under_way(
    pg_store: SQLAlchemyStore, postgres_url: str, default_index: RedisIndex
) -> None:
    index = default_index
    task_type = new_type(pg_store)
    name = task_type.type
    now = datetime.now(tz=UTC)
    try:
        # never built: no rebuild under way, whatever was filed so far
        assert index.rebuild_activity(name, now=now) == "none"
        row = json.loads(cli(postgres_url, "status", "-t", name, "--json"))[name]
        assert (row["complete"], row["rebuild"], row["rebuild_filed"]) == (False, "none", 0)
        assert "no rebuild under way" in cli(postgres_url, "status", "-t", name)
        # a process joins and holds the cursor
        step = index.rebuild_step(name, now=now, first="0 -")
        assert step.kind == "cursor"
        assert index.rebuild_activity(name, now=now) == "under way"
        row = json.loads(cli(postgres_url, "status", "-t", name, "--json"))[name]
        assert row["rebuild"] == "under way"
        # it died: once its hold ran out, the rebuild is stalled
        assert index.rebuild_activity(name, now=now + 2 * REBUILD_LEASE) == "stalled"
        # invalidated (an import): none again until a process joins
        index.invalidate(name)
        assert index.rebuild_activity(name, now=now) == "none"
        index.reset(name, now=now)
        assert index.rebuild_activity(name, now=now) == "complete"
    finally:
        index.client.delete(*index.keys(name).all())


def test_runners_share_the_sweep_cursor(pg_store: SQLAlchemyStore, index: RedisIndex) -> None:
    """Two runners' sweeps go on from each other's last page, not each from
    the start: together they go round the table once."""
    store = IndexedStore(pg_store, index)
    one = IndexKeeper(index, store, background=False)  # type: ignore[arg-type]
    two = IndexKeeper(index, store, background=False)  # type: ignore[arg-type]
    task_type = new_type(pg_store)
    now = datetime.now(tz=UTC)
    assert rebuild(index, store, task_type.type) == 0  # type: ignore[arg-type]
    created = store.create_tasks(waiting(task_type, 30, now), now=now)
    index.remove(task_type.type, [t.id or 0 for t in created[10:20]])  # lost
    one.sweep(task_type.type, page=10)
    assert one.drifted == 0
    two.sweep(task_type.type, page=10)
    assert two.drifted == 10
    assert index.sizes(task_type.type)["wait"] == 30
    assert index.sweep_cursor(task_type.type) == created[19].id
