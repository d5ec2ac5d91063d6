"""One-shot expiry against a real runner: nothing is expired that the
platform could not serve (PostgreSQL, a real Redis broker)."""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import services
from celery import Celery
from monitortest import H, S
from waiting import delete_queues, wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.celery_factory import make_app
from swh_like_scheduler.model import RunStatus, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.monitor import MonitorReport, MonitorSettings, monitor_tick
from swh_like_scheduler.policy import prepare_new_task
from swh_like_scheduler.runner import tick
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]

_numbers = itertools.count()


@pytest.fixture
def app() -> Iterator[Celery]:
    yield make_app(
        config_module=None,
        broker_url=services.redis_url(),
        load_workers=False,
        broker_connection_timeout=3,
    )


def new_type(store: SQLAlchemyStore, max_queue_length: int | None = None) -> TaskType:
    name = f"x{uuid.uuid4().hex[:8]}"
    return store.create_task_type(
        TaskType(
            type=name,
            backend_name="tests.monitor.never-run",
            queue=f"swh-test-{name}",
            max_queue_length=max_queue_length,
        )
    )


def oneshots(
    store: SQLAlchemyStore, task_type: TaskType, instants: list[datetime], **fields: object
) -> list[Task]:
    now = datetime.now(UTC)
    return store.create_tasks(
        [
            prepare_new_task(
                Task(
                    type=task_type.type,
                    args=(next(_numbers),),  # never identical: all are created
                    schedule_kind=ScheduleKind.ONESHOT,
                    next_run=at,
                    deadline=at,
                    **fields,  # type: ignore[arg-type]
                ),
                task_type,
                now,
            )
            for at in instants
        ],
        now=now,
    )


def statuses(store: SQLAlchemyStore, tasks: list[Task]) -> dict[TaskStatus, int]:
    found: dict[TaskStatus, int] = {}
    for task in store.get_tasks([t.id or 0 for t in tasks]):
        found[task.status] = found.get(task.status, 0) + 1
    return found


def test_a_oneshot_falling_due_is_never_expired_by_a_monitor_faster_than_the_runner(
    pg_store: SQLAlchemyStore, postgres_url: str, app: Celery
) -> None:
    """The monitor every 10 ms (no grace), the runner every second: each
    task falls due between two runner passes, with the monitor passing
    dozens of times before the runner's next claim."""
    task_type = new_type(pg_store)
    start = datetime.now(UTC) + 0.5 * S
    instants = [start + n * 0.1 * S for n in range(30)]
    tasks = oneshots(pg_store, task_type, instants)  # no max_delay, as jobs make them
    tasks += oneshots(pg_store, task_type, instants, max_delay=timedelta(0))
    stop = threading.Event()
    reports: list[MonitorReport] = []

    def runner() -> None:
        while not stop.is_set():
            tick(pg_store, app, datetime.now(UTC))
            stop.wait(1.0)

    def monitor() -> None:
        store = SQLAlchemyStore.from_url(postgres_url)
        settings = MonitorSettings(
            period=timedelta(milliseconds=10), oneshot_expiry_grace=timedelta(0), holder="m"
        )
        try:
            while not stop.is_set():
                reports.append(monitor_tick(store, datetime.now(UTC), settings=settings))
                stop.wait(0.01)
        finally:
            store.close()

    threads = [threading.Thread(target=runner), threading.Thread(target=monitor)]
    try:
        for thread in threads:
            thread.start()
        wait_until(
            lambda: statuses(pg_store, tasks).get(TaskStatus.SCHEDULED) == len(tasks),
            30,
            f"every task dispatched: {statuses(pg_store, tasks)}",
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        delete_queues(app, task_type.effective_queue)
    assert len(reports) > 30, len(reports)  # dozens of monitor passes, none expiring
    assert [e.task.id for r in reports for e in r.expired] == []
    for task in tasks:
        [run] = pg_store.get_task_runs(task.id or 0)
        assert run.status is RunStatus.SCHEDULED


def test_oneshots_falling_due_under_a_full_queue_are_dispatched_when_room_comes_back(
    pg_store: SQLAlchemyStore, app: Celery
) -> None:
    task_type = new_type(pg_store, max_queue_length=5)
    now = datetime.now(UTC)
    filler = oneshots(pg_store, task_type, [now - H] * 5)
    assert tick(pg_store, app, now).claimed == 5  # the queue is full
    wait_until(lambda: queue_depth(app, task_type.effective_queue) == 5, 10, "5 queued")
    late = oneshots(pg_store, task_type, [now + n * S for n in range(12)], max_delay=S)
    late += oneshots(pg_store, task_type, [now + n * S for n in range(12)])
    settings = MonitorSettings(oneshot_expiry_grace=timedelta(0), holder="m")
    try:
        # an hour of passes with no room: every task is past its deadline
        for minutes in range(0, 61, 10):
            at = now + timedelta(minutes=minutes)
            report = tick(pg_store, app, at)
            assert report.claimed == 0, report
            assert monitor_tick(pg_store, at, settings=settings).expired == ()
        assert statuses(pg_store, late) == {TaskStatus.WAITING: len(late)}
        # room comes back five at a time: the queue is emptied between passes
        dispatched = 0
        at = now + H
        while dispatched < len(late):
            delete_queues(app, task_type.effective_queue)
            at += S
            report = tick(pg_store, app, at)
            assert report.claimed > 0, report
            dispatched += report.claimed
            assert monitor_tick(pg_store, at, settings=settings).expired == ()
        assert dispatched == len(late)
        assert statuses(pg_store, late) == {TaskStatus.SCHEDULED: len(late)}
        assert len(filler) == 5
    finally:
        delete_queues(app, task_type.effective_queue)
