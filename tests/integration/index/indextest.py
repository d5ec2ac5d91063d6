"""What the index tests share: instants, tasks, a task type per test, a
runner's Celery app."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import services
from celery import Celery

from swh_like_scheduler.domain.model import Priority, ScheduleKind, Task, TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
S = timedelta(seconds=1)
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def task(n: int, *, next_run: datetime, deadline: datetime, priority: str = "normal") -> Task:
    """Task ``n`` of type ``crawl`` as filed in an index (no database)."""
    return Task(
        id=n,
        type="crawl",
        args=(n,),
        schedule_kind=ScheduleKind.ADAPTIVE,
        current_interval=H,
        priority=Priority(priority),
        next_run=next_run,
        deadline=deadline,
        created_at=T0,
    )


def new_type(store: SQLAlchemyStore, room: int | None = None) -> TaskType:
    """A task type of its own (and its own queue), with ``room`` as its
    max_queue_length."""
    name = f"t{uuid.uuid4().hex[:8]}"
    return store.create_task_type(
        TaskType(
            type=name,
            backend_name="swh.test.nothing",
            queue=f"swh-test-{name}",
            max_queue_length=room,
        )
    )


def runner_app() -> Celery:
    return make_app(
        config_module=None,
        broker_url=services.redis_url(),
        load_workers=False,
        broker_connection_timeout=3,
    )
