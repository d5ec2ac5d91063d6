"""The ``task-result`` event: a real ``celery worker`` with events on sends the
real return value, and the real listener records the outcome from it."""

from __future__ import annotations

import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import services
from waiting import delete_queues, wait_until

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskRun, TaskType
from swh_like_scheduler.listener import Listener
from swh_like_scheduler.listener.events import parse_event
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.worker import RESULT_EVENT

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "listener"))

import leaseapp
from celeryproc import worker_process
from listenertest import Recorder, listener_thread, make_test_app, options, unique_queue_name

pytestmark = [
    pytest.mark.postgresql,
    pytest.mark.redis,  # the leased tasks count in Redis, whatever the broker
]
H = timedelta(hours=1)


@pytest.fixture
def store(pg_store: SQLAlchemyStore) -> SQLAlchemyStore:
    return pg_store  # these tests need PostgreSQL


@pytest.fixture
def queue() -> str:
    return f"swh-test-result-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def add_task(
    store: SQLAlchemyStore, queue: str, backend_name: str, kwargs: dict[str, Any], *, lease: bool
) -> Task:
    name = f"r{uuid.uuid4().hex[:8]}"
    store.create_task_type(
        TaskType(
            type=name,
            backend_name=backend_name,
            queue=queue,
            default_interval=H,
            min_interval=timedelta(minutes=10),
            max_interval=timedelta(days=1),
            backoff_factor=2.0,
            uses_lease=lease,
        )
    )
    now = datetime.now(UTC) - timedelta(seconds=5)
    [task] = store.create_tasks(
        [
            Task(
                type=name,
                kwargs=kwargs,
                next_run=now,
                deadline=now,
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                last_good_start_at=now - H,  # not a first visit: the interval adapts
            )
        ],
        now=now,
    )
    return task


def ended_run(store: SQLAlchemyStore, task: Task) -> TaskRun | None:
    runs = store.get_task_runs(task.id or 0)
    return runs[0] if runs and not runs[0].status.is_open else None


def worker_env(broker_url: str, postgres_url: str) -> dict[str, str]:
    return {
        "LEASE_TEST_BROKER": broker_url,
        "LEASE_TEST_REDIS": services.redis_url(),
        "SWH_SCHEDULER_DB_URL": postgres_url,
        "LEASE_TEST_PING": "1",
    }


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_the_listener_records_the_real_result(
    store: SQLAlchemyStore, broker_url: str, postgres_url: str, queue: str, pool: str
) -> None:
    """The body returns ``{"pad": "x" * 3000, "status": "uneventful"}``: the
    ``task-succeeded`` repr is cut before the status (read alone it would say
    *eventful*); the ``task-result`` event makes the run uneventful."""
    app = make_test_app(broker_url)
    task = add_task(store, queue, leaseapp.LONG_RESULT_TASK, {"status": "uneventful"}, lease=False)
    queue_name = unique_queue_name()
    listener = Listener(app, store, rng=random.Random(1), options=options(queue_name))
    recorder = Recorder(listener)
    try:
        with (
            listener_thread(listener),
            worker_process(
                "leaseapp",
                queues=[queue],
                env=worker_env(broker_url, postgres_url),
                pool=pool,
                concurrency=2,
                events=True,
            ),
        ):
            assert tick(store, app, datetime.now(UTC)).published == 1
            wait_until(lambda: ended_run(store, task), 30, "the run to be recorded")
            run = ended_run(store, task)
            assert run is not None
            wait_until(
                lambda: any(
                    e.get("type") == "task-succeeded" and e.get("uuid") == run.backend_id
                    for e in recorder.events
                ),
                10,
                "the task-succeeded event",
            )
    finally:
        delete_queues(app, queue, queue_name)

    assert run.status is RunStatus.UNEVENTFUL
    assert run.result == leaseapp.long_result("uneventful")
    assert run.error is None
    [after] = store.get_tasks([task.id or 0])
    assert after.current_interval == 2 * H  # uneventful: the interval grows
    mine = [e for e in recorder.events if e.get("uuid") == run.backend_id]
    kinds = [e["type"] for e in mine]
    assert kinds.count(RESULT_EVENT) == 1 and kinds.count("task-succeeded") == 1
    assert kinds.index(RESULT_EVENT) < kinds.index("task-succeeded"), kinds
    [result_event] = [e for e in mine if e["type"] == RESULT_EVENT]
    assert result_event["result"] == leaseapp.long_result("uneventful")
    assert result_event["runtime"] >= 0
    [succeeded] = [e for e in mine if e["type"] == "task-succeeded"]
    assert len(succeeded["result"]) < len(repr(leaseapp.long_result("uneventful")))
    wrong = parse_event(succeeded)
    assert wrong is not None and wrong.status is RunStatus.EVENTFUL  # what the repr says


def test_no_result_event_without_task_events(
    store: SQLAlchemyStore, broker_url: str, postgres_url: str, queue: str
) -> None:
    """A worker started without ``-E`` sends no ``task-result`` (its leased
    task's run is recorded by the lease's own final write)."""
    app = make_test_app(broker_url)
    task = add_task(store, queue, leaseapp.TASK_NAME, {"duration": 0.1}, lease=True)
    queue_name = unique_queue_name()
    listener = Listener(app, store, rng=random.Random(1), options=options(queue_name))
    recorder = Recorder(listener)

    def heartbeat_after(instant: float) -> bool:
        return any(
            e.get("type") == "worker-heartbeat"
            and e.get("hostname", "").startswith("quiet-")
            and float(e.get("timestamp", 0)) > instant
            for e in recorder.events
        )

    try:
        with (
            listener_thread(listener),
            worker_process(
                "leaseapp",
                queues=[queue],
                env=worker_env(broker_url, postgres_url),
                pool="prefork",
                concurrency=2,
                events=False,
                name="quiet",
            ),
        ):
            assert tick(store, app, datetime.now(UTC)).published == 1
            wait_until(lambda: ended_run(store, task), 30, "the lease to end the run")
            ended_at = time.time()
            # worker events keep flowing: one sent well after the end shows
            # that a result event, had there been one, would have arrived
            wait_until(lambda: heartbeat_after(ended_at + 1), 15, "a later heartbeat")
    finally:
        delete_queues(app, queue, queue_name)
    run = ended_run(store, task)
    assert run is not None and run.status is RunStatus.EVENTFUL
    assert not [e for e in recorder.events if str(e.get("type", "")).startswith("task-")]
