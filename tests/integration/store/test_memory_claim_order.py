"""The memory store claims in the order PostgreSQL does.

The SQL store's order is SQL expressions (:func:`~swh_like_scheduler.
store.sql_claim.order_keys`, the long-run rule, the banned nodes); the
memory store computes the same keys in Python. Random ready worlds go to
both, and every dispatch order, set of live nodes and ``short_only`` must
pick the same tasks in the same order. PostgreSQL is the reference: its
interval arithmetic is exact, where SQLite's goes through floating Julian
days (two equal cycles may then compare unequal, and their order by id
is lost)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swh_like_scheduler.domain.model import (
    DispatchOrder,
    Priority,
    ScheduleKind,
    Task,
    TaskType,
)
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.memory import MemoryStore

pytestmark = pytest.mark.postgresql

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
LONG = timedelta(hours=1)
NODES: list[list[str] | None] = [None, [], ["a"], ["a", "b"]]


def seconds(low: int, high: int) -> st.SearchStrategy[timedelta]:
    return st.integers(low, high).map(lambda s: timedelta(seconds=s))


#: one task: when it is due, its deadline, its kind, its history, its nodes
specs = st.fixed_dictionaries(
    {
        "priority": st.sampled_from(list(Priority)),
        "next_run": seconds(-7200, 600),
        "slack": seconds(0, 7200),
        "periodic": st.booleans(),
        "good_end": st.none() | seconds(-86400, -1),
        "banned": st.sampled_from([(), ("a",), ("b",), ("a", "b")]),
        "expected": st.none() | seconds(1, 7200),
        "failed_for": st.none() | seconds(1, 7200),
    }
)


def build(n: int, spec: dict[str, Any]) -> Task:
    next_run = NOW + spec["next_run"]
    periodic = spec["periodic"]
    return Task(
        type="crawl",
        args=(n,),
        schedule_kind=ScheduleKind.PERIODIC if periodic else ScheduleKind.ONESHOT,
        period=timedelta(hours=2) if periodic else None,
        next_run=next_run,
        deadline=next_run + spec["slack"],
        priority=spec["priority"],
        dont_run_on_nodes=spec["banned"],
        expected_duration=spec["expected"],
    )


def history(task: Task, spec: dict[str, Any]) -> Task:
    """``task`` with the history its spec gives (a good end, a failed run)."""
    changes: dict[str, Any] = {"last_good_end_at": None}
    if spec["good_end"] is not None:
        changes["last_good_end_at"] = NOW + spec["good_end"]
    if spec["failed_for"] is not None:
        start = NOW - timedelta(days=1)
        changes.update(failure_count=1, last_start_at=start, last_end_at=start + spec["failed_for"])
    return task.updated(**changes)


@pytest.fixture
def pg(postgres_url: str) -> Any:
    store = SQLAlchemyStore.from_url(postgres_url)
    store.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
    yield store
    store.close()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(specs, min_size=1, max_size=25), st.integers(1, 30))
def test_the_memory_store_picks_what_postgresql_picks(
    pg: SQLAlchemyStore, world: list[dict[str, Any]], limit: int
) -> None:
    pg.delete_tasks([t.id or 0 for t in pg.search_tasks(limit=1000)])
    memory = MemoryStore()
    memory.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
    stores = (pg, memory)
    for store in stores:
        created = store.create_tasks(
            [build(n, spec) for n, spec in enumerate(world)], now=NOW - timedelta(days=2)
        )
        for task, spec in zip(created, world, strict=True):
            store.update_task(history(task, spec))
        # the same ids in both (the RANDOM order hashes them): PostgreSQL's
        # sequence goes on from one example to the next
        memory._state.counters["task"] = (created[0].id or 1) - 1

    # the ids differ between stores (PostgreSQL's sequence goes on): compare
    # the tasks by their argument
    def named(store: Any, ids: list[int]) -> list[int]:
        return [t.args[0] for t in store.get_tasks(ids)]

    for order in DispatchOrder:
        for nodes in NODES:
            for short_only in (False, True):
                picks = [
                    named(
                        store,
                        store.ready_task_ids(
                            "crawl",
                            now=NOW,
                            limit=limit,
                            nodes=nodes,
                            order=order,
                            short_only=short_only,
                            long_run=LONG,
                        ),
                    )
                    for store in stores
                ]
                assert picks[0] == picks[1], (order, nodes, short_only)

    # and a claim takes them, the same, with their slots and deadlines
    def claim(store: Any) -> list[tuple[Any, ...]]:
        got = store.claim_ready_tasks("crawl", now=NOW, limit=limit, nodes=["a"])
        tasks = store.get_tasks([c.task_id for c in got])
        return [(t.args[0], c.slot, c.deadline) for c, t in zip(got, tasks, strict=True)]

    assert claim(pg) == claim(memory)
