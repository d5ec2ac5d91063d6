"""A bulk action checks its filter again on the rows it writes: a task that
another writer changed between the read and the write is left as it is
(SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.values import BulkAction, BulkFilter

H = timedelta(hours=1)


def task(now: datetime, n: int, **kwargs: Any) -> Task:
    return Task(
        type="sleep",
        args=(n,),
        kwargs=kwargs,
        next_run=now,
        deadline=now + H,
        schedule_kind=ScheduleKind.ADAPTIVE,
        current_interval=H,
    )


def test_tasks_changed_between_read_and_write_are_held(
    store: SQLAlchemyStore, db_url: str, sleep_type: TaskType, now: datetime
) -> None:
    a, b, c, d = store.create_tasks([task(now, n, site="x") for n in range(4)], now=now)
    other = SQLAlchemyStore.from_url(db_url)
    write_batch = store._write_batch
    seen: list[list[int]] = []

    def meanwhile(action: Any, criteria: Any, chosen: list[int], *args: Any) -> None:
        seen.append(list(chosen))
        if len(seen) == 1:  # another writer, after the read, before the write
            other.disable_tasks([a.id or 0], now=now)
            other.update_task(b.updated(kwargs={"site": "y"}))
            other.delete_tasks([c.id or 0])
        write_batch(action, criteria, chosen, *args)

    store._write_batch = meanwhile  # type: ignore[method-assign]
    try:
        criteria = BulkFilter(
            type="sleep", status=(TaskStatus.WAITING,), arguments=(("site", "x"),)
        )
        done = store.apply_bulk(BulkAction.CANCEL, criteria, now=now)
    finally:
        other.close()
    assert seen == [[a.id, b.id, c.id, d.id]]
    assert (done.matched, done.changed, done.held) == (4, 1, 3)
    assert done.changed_ids == (d.id,)
    found = {t.id: t for t in store.search_tasks(limit=10)}
    assert found[a.id or 0].status is TaskStatus.DISABLED  # waiting no more: not cancelled
    assert found[b.id or 0].status is TaskStatus.WAITING  # matches no more
    assert found[b.id or 0].kwargs == {"site": "y"}
    assert found[d.id or 0].status is TaskStatus.CANCELLED
    assert c.id not in found


def test_a_status_change_between_read_and_write_is_seen_without_row_checks(
    store: SQLAlchemyStore, db_url: str, sleep_type: TaskType, now: datetime
) -> None:
    """No condition nor argument filter: the write's own WHERE checks again."""
    a, b = store.create_tasks([task(now, n) for n in range(2)], now=now)
    other = SQLAlchemyStore.from_url(db_url)
    write_batch = store._write_batch

    def meanwhile(action: Any, criteria: Any, chosen: list[int], *args: Any) -> None:
        other.cancel_tasks([a.id or 0], now=now)
        write_batch(action, criteria, chosen, *args)

    store._write_batch = meanwhile  # type: ignore[method-assign]
    try:
        done = store.apply_bulk(BulkAction.DISABLE, BulkFilter(type="sleep"), now=now)
    finally:
        other.close()
    assert (done.matched, done.changed, done.held) == (2, 1, 1)
    assert [t.status for t in store.get_tasks([a.id or 0, b.id or 0])] == [
        TaskStatus.CANCELLED,
        TaskStatus.DISABLED,
    ]
