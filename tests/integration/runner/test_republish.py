"""Runs whose message was lost are published again, with the same id, once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery
from waiting import wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.celery_factory import make_app
from swh_like_scheduler.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.runner.republish import republish_unstarted
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)


@pytest.fixture
def app(broker_url: str) -> Celery:
    return make_app(config_module=None, broker_url=broker_url, load_workers=False)


def test_lost_messages_are_published_again(db_url: str, app: Celery) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    queue = f"swh-test-republish-{uuid.uuid4().hex[:8]}"
    store.create_task_type(TaskType(type="t", backend_name="x.y", queue=queue))
    claimed_at = datetime.now(tz=UTC) - timedelta(minutes=10)
    created = store.create_tasks(
        [
            Task(
                type="t",
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=claimed_at,
                deadline=claimed_at,
            )
            for n in range(3)
        ],
        now=claimed_at,
    )
    # claimed, but the broker never got the messages
    claims = store.claim_ready_tasks("t", now=claimed_at, limit=10)
    store.cancel_tasks([created[2].id or 0], now=claimed_at)
    now = datetime.now(tz=UTC)
    try:
        assert republish_unstarted(store, app, now, older_than=timedelta(minutes=5)) == 2
        # (RabbitMQ counts a queue's messages a moment after accepting them)
        wait_until(lambda: queue_depth(app, queue) == 2, 15, "2 messages")
        for claim in claims[:2]:
            run = store.get_task_run(claim.backend_id)
            assert run is not None and run.status is RunStatus.SCHEDULED
            assert run.scheduled == now
            assert [h["event"] for h in run.history] == ["republished"]
        # not again before the delay has passed once more
        assert republish_unstarted(store, app, now, older_than=timedelta(minutes=5)) == 0
        later = now + timedelta(minutes=6)
        assert republish_unstarted(store, app, later, older_than=timedelta(minutes=5)) == 2
        wait_until(lambda: queue_depth(app, queue) == 4, 15, "4 messages")
    finally:
        store.close()
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
