"""A claim never dispatches a task inside one of its blackout windows."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from swh_like_scheduler.domain.model import BlackoutPeriod, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore


def test_task_in_a_blackout_at_claim_time_waits_for_its_end(store: SQLAlchemyStore) -> None:
    store.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
    created_at = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    quiet = BlackoutPeriod(time(13, 0), time(14, 0))  # Paris local time
    blocked, free = store.create_tasks(
        [
            Task(
                type="crawl",
                args=(n,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=created_at,
                deadline=created_at + timedelta(hours=8),
                tz="Europe/Paris",
                blackout_periods=(quiet,) if n == 0 else (),
            )
            for n in range(2)
        ],
        now=created_at,
    )
    # it waited for capacity until 13:30 Paris time (12:30 UTC), inside its window
    during = datetime(2026, 11, 21, 12, 30, tzinfo=UTC)
    claimed = store.claim_ready_tasks("crawl", now=during, limit=10)
    assert [c.task_id for c in claimed] == [free.id]
    (back,) = store.get_tasks([blocked.id or 0])
    assert back.status is TaskStatus.WAITING
    assert back.next_run == datetime(2026, 11, 21, 13, 0, tzinfo=UTC)  # 14:00 in Paris
    assert store.get_task_runs(blocked.id or 0) == []
    assert store.claim_ready_tasks("crawl", now=during + timedelta(minutes=10), limit=10) == []
    after = store.claim_ready_tasks("crawl", now=back.next_run, limit=10)
    assert [c.task_id for c in after] == [blocked.id]
    assert [r.slot for r in store.get_task_runs(blocked.id or 0)] == [back.next_run]
