"""What the runner's and the dispatch's integration tests share: a Celery
app whose one task notes in Redis the Celery ids it executed (the side effect
the tests count), a task type routed to it, and ready tasks of that type."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

import redis
import services
from celery import Celery

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
RECORD_TASK = "tests.runner.record"


def executed_key(queue: str) -> str:
    return f"swh-test-executed:{queue}"


def make_test_app(broker_url: str) -> Celery:
    app = make_app(
        config_module=None,
        broker_url=broker_url,
        load_workers=False,
        broker_connection_timeout=3,
        broker_heartbeat=2,
        worker_hijack_root_logger=False,
    )
    recorder_url = services.redis_url()

    @app.task(name=RECORD_TASK, bind=True, shared=False)
    def record(self, *args: object, **kwargs: object) -> dict[str, str]:  # type: ignore[no-untyped-def]
        queue = self.request.delivery_info.get("routing_key") or "unknown"
        redis.Redis.from_url(recorder_url).rpush(executed_key(queue), self.request.id)
        return {"status": "eventful"}

    return app


def new_type(store: SQLAlchemyStore, max_queue_length: int | None) -> TaskType:
    name = f"t{uuid.uuid4().hex[:8]}"
    return store.create_task_type(
        TaskType(
            type=name,
            backend_name=RECORD_TASK,
            queue=f"swh-test-{name}",
            max_queue_length=max_queue_length,
        )
    )


def ready_tasks(task_type: TaskType, count: int, now: datetime) -> Iterator[Task]:
    for n in range(count):
        yield Task(
            type=task_type.type,
            args=(n,),
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=H,
            next_run=now - H,
            deadline=now + timedelta(seconds=(n * 7919) % count),
        )
