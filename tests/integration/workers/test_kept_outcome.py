"""A result backend that cannot store a run's result never decides its
outcome: the worker records the body's own outcome in the scheduler
database (no listener runs here: nothing else could record it), and
Celery's event says what the body did. Real PostgreSQL, a real Redis
broker, an in-process Celery worker; the result backend is a closed port."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import services
from celery import Celery
from celery.contrib.testing.worker import start_worker
from waiting import delete_queues, wait_until

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.worker import SchedulerTask

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]

TASK = "tests.kept-outcome.body"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def queue() -> str:
    return f"swh-test-kept-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def app(postgres_url: str, queue: str) -> Iterator[Celery]:
    app = make_app(
        config_module=None,
        broker_url=services.redis_url(),
        load_workers=False,
        worker_hijack_root_logger=False,
        result_backend=f"redis://127.0.0.1:{closed_port()}/0",
        # give up at once instead of Celery's 20 retries a second apart
        result_backend_transport_options={"retry_policy": {"max_retries": 0}},
        swh_scheduler_db_url=postgres_url,
    )

    @app.task(name=TASK, base=SchedulerTask, bind=True, shared=False)
    def body(self: SchedulerTask, outcome: str) -> dict[str, str]:
        if outcome == "raise":
            raise ValueError("the body's own error")
        return {"status": outcome}

    yield app
    delete_queues(app, queue)


def test_the_bodys_outcome_is_recorded_when_the_backend_cannot_store_it(
    pg_store: SQLAlchemyStore, app: Celery, queue: str
) -> None:
    pg_store.create_task_type(
        TaskType(
            type="kept",
            backend_name=TASK,
            queue=queue,
            default_interval=timedelta(hours=1),
            num_retries=3,
        )
    )
    now = datetime.now(UTC) - timedelta(seconds=1)
    outcomes = ["uneventful", "eventful", "raise"]
    tasks = pg_store.create_tasks(
        [
            Task(
                type="kept",
                args=(outcome,),
                next_run=now,
                deadline=now,
                schedule_kind=ScheduleKind.ONESHOT,
            )
            for outcome in outcomes
        ],
        now=now,
    )
    assert tick(pg_store, app, datetime.now(UTC)).published == 3

    def ended() -> list[RunStatus]:
        return [pg_store.get_task_runs(t.id or 0)[0].status for t in tasks]

    with start_worker(app, pool="threads", concurrency=3, perform_ping_check=False, queues=[queue]):
        wait_until(lambda: not any(s.is_open for s in ended()), 60, f"runs ended: {ended()}")
    assert ended() == [RunStatus.UNEVENTFUL, RunStatus.EVENTFUL, RunStatus.FAILED]
    failed = pg_store.get_task_runs(tasks[2].id or 0)[0]
    assert failed.error is not None and "the body's own error" in failed.error
    after = {t.id: t for t in pg_store.get_tasks([t.id or 0 for t in tasks])}
    assert after[tasks[0].id].status is TaskStatus.COMPLETED
    assert after[tasks[0].id].failure_count == 0
    # the failed one-shot waits for its retry, as its type says
    assert after[tasks[2].id].status is TaskStatus.WAITING
    assert after[tasks[2].id].failure_count == 1
