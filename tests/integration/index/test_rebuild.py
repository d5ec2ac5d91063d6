"""The shared rebuild of the index (real Redis and PostgreSQL): class by
class and earliest deadline first, several processes at once without
reading a page twice, a page whose process died taken over, a rebuild
begun anew under a process that then stops."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.model import Priority, ScheduleKind, Task, TaskType
from swh_like_scheduler.index import RedisIndex, rebuild
from swh_like_scheduler.index.rebuild import Cursor, Page
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.redis, pytest.mark.postgresql]

H = timedelta(hours=1)


class Reads:
    """A store whose ``waiting_entries`` calls are recorded (the pages each
    process read), with an optional hook run before each read."""

    def __init__(self, store: SQLAlchemyStore, hook: Any = None) -> None:
        self._store = store
        self.hook = hook
        self.calls: list[tuple[str, Priority, Any, Any]] = []
        self._lock = threading.Lock()

    def waiting_entries(self, task_type: str, priority: Priority, **kw: Any) -> Any:
        if self.hook is not None:
            self.hook(len(self.calls))
        found = self._store.waiting_entries(task_type, priority, **kw)
        with self._lock:
            self.calls.append((threading.current_thread().name, priority, kw.get("after"), found))
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture
def fleet(pg_store: SQLAlchemyStore) -> tuple[SQLAlchemyStore, str, dict[Priority, list[int]]]:
    """A type with 30 high, 45 normal and 15 low waiting tasks (their ids
    by class in dispatch order) and 10 disabled ones."""
    name = f"t{uuid.uuid4().hex[:8]}"
    pg_store.create_task_type(TaskType(type=name, backend_name="swh.test.nothing"))
    now = datetime.now(tz=UTC)
    counts = {Priority.HIGH: 30, Priority.NORMAL: 45, Priority.LOW: 15}
    tasks = [
        Task(
            type=name,
            args=(p.value, n),
            priority=p,
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=H,
            next_run=now - H,
            # deadlines out of id order, several equal (then by id)
            deadline=now + timedelta(minutes=(n * 7) % 11),
        )
        for p, count in counts.items()
        for n in range(count)
    ]
    created = pg_store.create_tasks(tasks, now=now)
    off = pg_store.create_tasks(
        [t.updated(args=("off", n)) for n, t in enumerate(tasks[:10])], now=now
    )
    pg_store.disable_tasks([t.id or 0 for t in off], now=now)
    order = {
        p: [t.id or 0 for t in sorted(created, key=lambda t: (t.deadline, t.id)) if t.priority is p]
        for p in counts
    }
    return pg_store, name, order


def claimed_in_order(index: RedisIndex, name: str) -> list[int]:
    return index.claim(name, now=datetime.now(tz=UTC) + H, limit=1000) or []


def everyone(order: dict[Priority, list[int]]) -> list[int]:
    return sorted(i for ids in order.values() for i in ids)


def dispatch_keys(store: SQLAlchemyStore, ids: list[int]) -> list[tuple[int, datetime]]:
    """The (class, deadline) of each task: the index's order (equal
    deadlines in no particular order)."""
    tasks = {t.id: t for t in store.get_tasks(ids)}
    return [(tasks[i].priority.rank, tasks[i].deadline) for i in ids]


def test_pages_are_read_class_by_class_earliest_deadline_first(
    index: RedisIndex, fleet: tuple[SQLAlchemyStore, str, dict[Priority, list[int]]]
) -> None:
    store, name, order = fleet
    reads = Reads(store)
    assert rebuild(index, reads, name, page=10) == 90  # type: ignore[arg-type]
    assert index.is_complete(name)
    # the pages in the order read: high first, each class by deadline
    read = [e.id for *_, found in reads.calls for e in found]
    expected = order[Priority.HIGH] + order[Priority.NORMAL] + order[Priority.LOW]
    assert read == expected
    assert [c[1] for c in reads.calls if c[3]] == [Priority.HIGH] * 3 + [Priority.NORMAL] * 5 + [
        Priority.LOW
    ] * 2
    claimed = claimed_in_order(index, name)
    assert sorted(claimed) == everyone(order)
    keys = dispatch_keys(store, claimed)
    assert keys == sorted(keys)
    # complete: joining again reads nothing
    done = len(reads.calls)
    assert rebuild(index, reads, name, page=10) == 90  # type: ignore[arg-type]
    assert len(reads.calls) == done


def test_several_processes_share_one_rebuild_without_reading_a_page_twice(
    index: RedisIndex, fleet: tuple[SQLAlchemyStore, str, dict[Priority, list[int]]]
) -> None:
    store, name, order = fleet

    class SlowToFile(RedisIndex):
        # filing a page takes a while: the others read on meanwhile
        def put_entries(self, *args: Any, **kwargs: Any) -> int:
            time.sleep(0.02)
            return super().put_entries(*args, **kwargs)

    shared = SlowToFile(index.client, prefix=index.prefix)
    reads = Reads(store)
    results: dict[str, int | None] = {}

    def join() -> None:
        results[threading.current_thread().name] = rebuild(
            shared,
            reads,  # type: ignore[arg-type]
            name,
            page=5,
            poll=0.001,
        )

    threads = [threading.Thread(target=join, name=f"runner-{i}") for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == {f"runner-{i}": 90 for i in range(3)}
    pages = [(c[1], c[2]) for c in reads.calls]
    assert len(pages) == len(set(pages)), "a page was read twice"
    filed = sorted(e.id for *_, found in reads.calls for e in found)
    assert filed == everyone(order)
    assert len({c[0] for c in reads.calls if c[3]}) > 1, "one process did it all"
    claimed = claimed_in_order(index, name)
    assert sorted(claimed) == everyone(order)
    keys = dispatch_keys(store, claimed)
    assert keys == sorted(keys)


def test_a_page_whose_process_died_is_taken_over_after_its_lease(
    index: RedisIndex, fleet: tuple[SQLAlchemyStore, str, dict[Priority, list[int]]]
) -> None:
    store, name, order = fleet
    now = datetime.now(tz=UTC)
    # a process takes the first page of the high class and dies before filing it
    step = index.rebuild_step(name, now=now, first=Cursor(0).text())
    assert step.kind == "cursor"
    first = store.waiting_entries(name, Priority.HIGH, limit=10)
    page = Page(0, None, first[-1].key)
    assert index.rebuild_advance(
        name,
        step.token,
        now=now,
        cursor=step.value,
        next_cursor=Cursor(0, page.until).text(),
        page=page.text(),
    )
    # a runner's background share: every other page, then the dead one's is
    # still held: it leaves it (and the index stays out of use)
    assert rebuild(index, store, name, page=10, wait=False, clock=lambda: now) is None
    assert not index.is_complete(name)
    assert index.claim(name, now=now, limit=10) is None
    # a task created meanwhile in the dead page's range is read with it
    late = store.create_tasks(
        [
            Task(
                type=name,
                args=("late",),
                priority=Priority.HIGH,
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=now - H,
                deadline=first[0].deadline,
            )
        ],
        now=now,
    )[0]
    # after the lease, the next process to join files it (80 + 11 filed)
    later = now + timedelta(minutes=3)
    assert rebuild(index, store, name, page=10, wait=False, clock=lambda: later) == 91
    assert index.is_complete(name)
    claimed = claimed_in_order(index, name)
    assert sorted(claimed) == sorted([*everyone(order), late.id or 0])
    keys = dispatch_keys(store, claimed)
    assert keys == sorted(keys)


def test_a_rebuild_begun_anew_stops_the_processes_of_the_old_one(
    index: RedisIndex, fleet: tuple[SQLAlchemyStore, str, dict[Priority, list[int]]]
) -> None:
    store, name, order = fleet

    def invalidate_at_third_read(calls: int) -> None:
        if calls == 2:
            index.invalidate(name)  # an import, or FLUSHALL

    reads = Reads(store, hook=invalidate_at_third_read)
    assert rebuild(index, reads, name, page=10) is None  # type: ignore[arg-type]
    assert not index.is_complete(name)
    # the next one begins anew and files every task
    assert rebuild(index, store, name, page=10) == 90
    assert sorted(claimed_in_order(index, name)) == everyone(order)


def test_the_process_completing_a_rebuild_says_so_even_when_it_filed_nothing(
    index: RedisIndex, pg_store: SQLAlchemyStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Every task went out before the rebuild read it (a beat pass, say):
    the index is complete with nothing filed, and the process that completed
    it logs that; one joining afterwards does not."""
    name = f"t{uuid.uuid4().hex[:8]}"
    pg_store.create_task_type(TaskType(type=name, backend_name="swh.test.nothing"))
    with caplog.at_level("INFO", logger="swh_like_scheduler.index.rebuild"):
        assert rebuild(index, pg_store, name, page=10) == 0
        assert index.is_complete(name)
        said = [r.getMessage() for r in caplog.records if "rebuilt" in r.getMessage()]
        assert said == [f"index of {name} rebuilt: 0 waiting tasks (0 by this process)"]
        caplog.clear()
        assert rebuild(index, pg_store, name, page=10) == 0  # already complete
        assert not [r for r in caplog.records if "rebuilt" in r.getMessage()]
