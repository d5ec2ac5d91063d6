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
import sqlalchemy as sa
from celery import Celery
from monitortest import H, S
from waiting import delete_queues, wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import (
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.monitor import MonitorReport, MonitorSettings, monitor_tick
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.policy import prepare_new_task
from swh_like_scheduler.policy.times import fmt_instant
from swh_like_scheduler.store import SQLAlchemyStore, make_engine
from swh_like_scheduler.store.tables import task as task_t

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
    assert [e.task.id for r in reports for e in r.expired] == []
    windows = []  # (due, dispatched) of each task
    for task, at in zip(tasks, instants + instants, strict=True):
        [run] = pg_store.get_task_runs(task.id or 0)
        assert run.status is RunStatus.SCHEDULED
        windows.append((at, run.scheduled))
    # the test's power: passes that ran while some task was due and not yet
    # dispatched (each such pass could have expired it); counted from the
    # runs' own dispatch instants, so a slow machine gives fewer but no
    # false pass
    exposed = [r for r in reports if any(due < r.now < sent for due, sent in windows)]
    assert len(exposed) >= 5, (len(exposed), len(reports))


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


def test_oneshots_held_by_another_transaction_during_a_pass_with_room_do_not_expire(
    pg_store: SQLAlchemyStore, postgres_url: str, app: Celery
) -> None:
    """Late one-shots whose rows another transaction holds (a claim
    cancelled by its time limit, a runner dying before its commit) while a
    pass with room to spare runs: the pass skips them, so it is no chance
    they had; once released, the next pass dispatches them."""
    task_type = new_type(pg_store)
    now = datetime.now(UTC)
    late = oneshots(pg_store, task_type, [now - H] * 20, max_delay=S)
    free = oneshots(pg_store, task_type, [now - H] * 5)
    settings = MonitorSettings(oneshot_expiry_grace=timedelta(0), holder="m")
    holder = make_engine(postgres_url)
    try:
        with holder.connect() as conn:
            held = conn.scalars(
                sa.select(task_t.c.id)
                .where(task_t.c.id.in_([t.id for t in late]))
                .with_for_update()
            ).all()
            assert len(held) == len(late)
            report = tick(pg_store, app, datetime.now(UTC))
            assert report.claimed == len(free), report  # room for thousands more
            assert monitor_tick(pg_store, datetime.now(UTC), settings=settings).expired == ()
            conn.rollback()  # released, never claimed
        assert monitor_tick(pg_store, datetime.now(UTC), settings=settings).expired == ()
        assert statuses(pg_store, late) == {TaskStatus.WAITING: len(late)}
        report = tick(pg_store, app, datetime.now(UTC))
        assert report.claimed == len(late), report
        assert statuses(pg_store, late) == {TaskStatus.SCHEDULED: len(late)}
        assert monitor_tick(pg_store, datetime.now(UTC), settings=settings).expired == ()
    finally:
        holder.dispose()
        delete_queues(app, task_type.effective_queue)


def test_oneshots_created_past_their_max_delay_wait_for_a_pass_begun_after_them(
    pg_store: SQLAlchemyStore, app: Celery
) -> None:
    """One-shots created after the last pass with room, already past their
    ``max_delay``: that pass never saw them, nothing expires; a pass that
    began after their creation and could not take them (their only allowed
    nodes have no live worker) lets them expire, and their runs name it."""
    task_type = new_type(pg_store)
    oneshots(pg_store, task_type, [datetime.now(UTC) - H])
    assert tick(pg_store, app, datetime.now(UTC)).claimed == 1  # a pass with room
    late = oneshots(
        pg_store,
        task_type,
        [datetime.now(UTC) - H] * 20,
        max_delay=S,
        dont_run_on_nodes=("node-x",),
    )
    settings = MonitorSettings(oneshot_expiry_grace=timedelta(0), holder="m")
    try:
        assert monitor_tick(pg_store, datetime.now(UTC), settings=settings).expired == ()
        assert statuses(pg_store, late) == {TaskStatus.WAITING: len(late)}
        began = datetime.now(UTC)
        assert tick(pg_store, app, began).claimed == 0  # no live worker may take them
        expired = monitor_tick(pg_store, datetime.now(UTC), settings=settings).expired
        assert sorted(e.task.id or 0 for e in expired) == sorted(t.id or 0 for t in late)
        for expiry in expired:
            assert expiry.run.history[0]["room_at"] == began.isoformat()
            assert expiry.run.error and f"had room at {fmt_instant(began)}" in expiry.run.error
        assert statuses(pg_store, late) == {TaskStatus.DISABLED: len(late)}
    finally:
        delete_queues(app, task_type.effective_queue)


def test_room_is_withheld_only_from_the_class_whose_rows_were_held(
    pg_store: SQLAlchemyStore, postgres_url: str, app: Celery
) -> None:
    """Room is per class: a pass that skipped held rows of class ``high``
    still had room for class ``normal``, whose late one-shots it could not
    take (no live worker on an allowed node): those expire, the held ones
    wait and are dispatched once released."""
    task_type = new_type(pg_store)
    now = datetime.now(UTC)
    held = oneshots(pg_store, task_type, [now - H] * 10, max_delay=S, priority=Priority.HIGH)
    banned = oneshots(
        pg_store, task_type, [now - H] * 10, max_delay=S, dont_run_on_nodes=("node-x",)
    )
    settings = MonitorSettings(oneshot_expiry_grace=timedelta(0), holder="m")
    holder = make_engine(postgres_url)
    try:
        with holder.connect() as conn:
            ids = [t.id for t in held]
            conn.execute(sa.select(task_t.c.id).where(task_t.c.id.in_(ids)).with_for_update())
            assert tick(pg_store, app, datetime.now(UTC)).claimed == 0
            conn.rollback()
        expired = monitor_tick(pg_store, datetime.now(UTC), settings=settings).expired
        assert sorted(e.task.id or 0 for e in expired) == sorted(t.id or 0 for t in banned)
        assert statuses(pg_store, held) == {TaskStatus.WAITING: len(held)}
        assert tick(pg_store, app, datetime.now(UTC)).claimed == len(held)
        assert statuses(pg_store, held) == {TaskStatus.SCHEDULED: len(held)}
    finally:
        holder.dispose()
        delete_queues(app, task_type.effective_queue)
