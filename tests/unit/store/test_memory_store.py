"""What the store held in memory promises beyond the contract suite: a
transaction block that raises leaves nothing behind, its indexes included,
and threads claiming at once never take one task twice."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.exceptions import Conflict
from swh_like_scheduler.domain.model import Priority, RunStatus, Task, TaskStatus, TaskType
from swh_like_scheduler.store.memory import MemoryStore
from swh_like_scheduler.store.values import RunEnd

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _store(count: int) -> tuple[MemoryStore, list[Task]]:
    store = MemoryStore()
    store.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
    tasks = store.create_tasks(
        [
            Task(type="crawl", args=(n,), next_run=NOW - timedelta(seconds=n), deadline=NOW)
            for n in range(count)
        ],
        now=NOW,
    )
    return store, tasks


def test_a_transaction_that_raises_leaves_the_tasks_claimable_again() -> None:
    store, tasks = _store(5)
    with pytest.raises(RuntimeError), store.transaction():
        claimed = store.claim_ready_tasks("crawl", now=NOW, limit=3)
        assert len(claimed) == 3
        store.start_task_runs([(c.backend_id, NOW, "w1") for c in claimed])
        store.create_tasks([Task(type="crawl", args=("new",), next_run=NOW, deadline=NOW)], now=NOW)
        raise RuntimeError("the block fails")
    assert [t.status for t in store.get_tasks([t.id or 0 for t in tasks])] == [
        TaskStatus.WAITING
    ] * 5
    assert store.count_tasks() == 5
    assert all(store.get_task_runs(t.id or 0) == [] for t in tasks)
    assert store.get_task_run(claimed[0].backend_id) is None
    # the indexes were built again from the rows put back: every task is ready
    assert store.next_ready_time("crawl") == NOW - timedelta(seconds=4)
    again = store.claim_ready_tasks("crawl", now=NOW, limit=10)
    assert sorted(c.task_id for c in again) == sorted(t.id or 0 for t in tasks)
    # and the ids taken by the undone write are given again, as a sequence
    # rolled back would not: nothing refers to them
    (new,) = store.create_tasks(
        [Task(type="crawl", args=("new",), next_run=NOW, deadline=NOW)], now=NOW
    )
    assert new.id == 6


def test_a_conflict_inside_a_write_undoes_the_whole_write() -> None:
    store, tasks = _store(2)
    first, second = tasks
    # the second task made identical to the first: the write is refused whole
    twin = second.updated(args=first.args)
    with pytest.raises(Conflict, match="identical live task"), store.transaction():
        store.update_task(first.updated(priority=Priority.HIGH))
        store.update_task(twin.updated(priority=Priority.HIGH))
    assert [t.priority for t in store.get_tasks([first.id or 0, second.id or 0])] == [
        Priority.NORMAL,
        Priority.NORMAL,
    ]
    assert store.list_pending("crawl", now=NOW, priorities=[Priority.HIGH]) == []


def test_threads_claiming_at_once_never_take_a_task_twice() -> None:
    store, tasks = _store(400)
    taken: list[int] = []
    lock = threading.Lock()

    def claimer() -> None:
        while claimed := store.claim_ready_tasks("crawl", now=NOW, limit=7):
            with lock:
                taken.extend(c.task_id for c in claimed)
            ends = [RunEnd(c.backend_id, RunStatus.EVENTFUL, NOW) for c in claimed]
            store.end_task_runs(ends)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(taken) == sorted(t.id or 0 for t in tasks)
