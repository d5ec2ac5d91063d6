"""The lease end to end: real PostgreSQL, real brokers (Redis and RabbitMQ),
real Celery workers (in-process and ``celery worker`` subprocesses), the real
runner pass (:func:`tick`) and monitor pass (:func:`monitor_tick`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import services
from celery import Celery
from celery.contrib.testing.worker import start_worker
from celery.worker import state as worker_state
from waiting import delete_queues, wait_until

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import (
    BlackoutPeriod,
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.monitor import monitor_tick
from swh_like_scheduler.store import SQLAlchemyStore

sys.path.insert(0, str(Path(__file__).parent))

import leaseapp
from celeryproc import kill_group, start_worker_process

pytestmark = [
    pytest.mark.postgresql,
    pytest.mark.redis,  # the tasks count what they do in Redis, whatever the broker
]
PING = 1.0
#: seconds from the task's creation to the start of its blackout window
BLACKOUT_AFTER = 8.0
#: what a loaded 2-core CI machine may add to a bound (scheduling, start-up)
SLACK = 1.5


@pytest.fixture
def counter() -> redis.Redis:
    return redis.Redis.from_url(services.require("redis", services.redis_url))


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"swh-test-lease-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield name


@pytest.fixture
def store(pg_store: SQLAlchemyStore) -> SQLAlchemyStore:
    return pg_store  # these tests need PostgreSQL


@pytest.fixture
def app(broker_url: str, postgres_url: str, queue: str) -> Iterator[Celery]:
    app = leaseapp.build(broker_url, postgres_url, services.redis_url(), PING)
    yield app
    delete_queues(app, queue)


def ensure_type(store: SQLAlchemyStore, queue: str) -> None:
    if store.get_task_type("leased") is None:
        store.create_task_type(
            TaskType(
                type="leased",
                backend_name=leaseapp.TASK_NAME,
                queue=queue,
                default_interval=timedelta(hours=1),
                max_queue_length=100,
                uses_lease=True,
            )
        )


def new_tasks(store: SQLAlchemyStore, queue: str, *kwargs: dict[str, Any]) -> list[Task]:
    """Leased adaptive tasks, ready now (no run yet: the runner makes them)."""
    ensure_type(store, queue)
    now = datetime.now(UTC) - timedelta(seconds=5)
    return store.create_tasks(
        [
            Task(
                type="leased",
                kwargs=k,
                args=(i,),
                next_run=now,
                deadline=now + timedelta(seconds=1),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(hours=1),
            )
            for i, k in enumerate(kwargs)
        ],
        now=now,
    )


def add_tasks(store: SQLAlchemyStore, queue: str, *durations: float) -> list[tuple[Task, TaskRun]]:
    """Leased tasks with one scheduled run each (not yet published)."""
    made = new_tasks(store, queue, *({"duration": d} for d in durations))
    now = datetime.now(UTC) - timedelta(seconds=5)
    return [(t, store.schedule_task_run(t.id or 0, now=now)) for t in made]


def publish(app: Celery, run: TaskRun, queue: str, duration: float) -> None:
    app.send_task(
        leaseapp.TASK_NAME, kwargs={"duration": duration}, task_id=run.backend_id, queue=queue
    )


def run_of(store: SQLAlchemyStore, backend_id: str) -> TaskRun:
    run = store.get_task_run(backend_id)
    assert run is not None
    return run


def runs_of(store: SQLAlchemyStore, task_id: int) -> list[TaskRun]:
    """The task's runs, oldest first."""
    return sorted(store.get_task_runs(task_id), key=lambda r: r.scheduled)


def events_of(run: TaskRun) -> list[str]:
    return [h["event"] for h in run.history]


def in_process_worker(app: Celery, queue: str) -> Any:
    return start_worker(
        app,
        pool="threads",
        concurrency=4,
        perform_ping_check=False,
        queues=[queue],
        loglevel="WARNING",
        shutdown_timeout=15,
    )


def worker_env(broker_url: str, postgres_url: str) -> dict[str, str]:
    return {
        "LEASE_TEST_BROKER": broker_url,
        "LEASE_TEST_REDIS": services.redis_url(),
        "SWH_SCHEDULER_DB_URL": postgres_url,
        "LEASE_TEST_PING": str(PING),
    }


def test_same_message_twice_executes_once(
    store: SQLAlchemyStore, app: Celery, queue: str, counter: redis.Redis
) -> None:
    """The runner dispatches the run, then it is sent again (same task id),
    as a broker redelivery would: a worker with 4 threads gets both
    copies at once; the body runs once, the second copy is refused."""
    [task] = new_tasks(store, queue, {"duration": 1.5})
    assert tick(store, app, datetime.now(UTC)).published == 1
    [run] = store.get_task_runs(task.id or 0)
    later = datetime.now(UTC) + timedelta(seconds=1)
    assert leaseapp.send_again(store, app, later) == 1
    assert [r.backend_id for r in store.get_task_runs(task.id or 0)] == [run.backend_id]
    with in_process_worker(app, queue):
        wait_until(
            lambda: (
                not run_of(store, run.backend_id).status.is_open
                and counter.llen(leaseapp.refusals_key(run.backend_id)) == 1
            ),
            20,
            "the run to end and the duplicate to be refused",
        )
    assert int(counter.get(leaseapp.executions_key(run.backend_id)) or 0) == 1
    [reason] = counter.lrange(leaseapp.refusals_key(run.backend_id), 0, -1)
    assert (reason.decode() if isinstance(reason, bytes) else reason) in (
        "already_running",
        "finished_run",
    )
    ended = run_of(store, run.backend_id)
    assert ended.status is RunStatus.EVENTFUL  # written by the lease, no listener running
    assert events_of(ended) == ["republished", "assigned", "refused_copy"]
    [after] = store.get_tasks([task.id or 0])
    assert after.status is TaskStatus.WAITING and after.owner_tag is None
    assert len(store.get_task_runs(task.id or 0)) == 1


def test_cancel_from_the_cli_stops_the_running_task(
    store: SQLAlchemyStore, app: Celery, queue: str, counter: redis.Redis, postgres_url: str
) -> None:
    """``swh scheduler task cancel ID`` while the run runs: the worker stops
    within one ping, the run ends cancelled, the task is never dispatched again."""
    [task] = new_tasks(store, queue, {"duration": 30})
    assert tick(store, app, datetime.now(UTC)).published == 1
    [run] = store.get_task_runs(task.id or 0)
    steps = leaseapp.steps_key(run.backend_id)
    swh = Path(sys.executable).parent / "swh"
    with in_process_worker(app, queue):
        wait_until(lambda: int(counter.get(steps) or 0) > 3, 20, "the body to run")
        done = subprocess.run(
            [
                str(swh),
                "scheduler",
                "--db-url",
                postgres_url,
                "task",
                "cancel",
                "--json",
                str(task.id),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        [cancelled] = json.loads(done.stdout)
        assert cancelled["id"] == task.id and cancelled["status"] == "cancelled"
        wait_until(
            lambda: run_of(store, run.backend_id).status is RunStatus.CANCELLED,
            PING + SLACK,
            "the run to be cancelled",
        )
        seen = int(counter.get(steps) or 0)
        wait_until(lambda: not worker_state.active_requests, 5, "the body to return")
        assert int(counter.get(steps) or 0) <= seen + 1, "the body kept running"
        for _ in range(2):  # later runner passes never dispatch it again
            assert tick(store, app, datetime.now(UTC) + timedelta(days=2)).claimed == 0
    ended = run_of(store, run.backend_id)
    assert ended.ended is not None
    # from the cancel's write to the worker's final write (one machine's clock)
    stopped_after = (ended.ended - datetime.fromisoformat(cancelled["updated_at"])).total_seconds()
    print(f"the worker stopped {stopped_after:.2f} s after the cancel")
    assert 0 <= stopped_after <= PING + SLACK
    [after] = store.get_tasks([task.id or 0])
    assert after.status is TaskStatus.CANCELLED and after.owner_tag is None
    assert store.get_task_runs(task.id or 0) == [ended]  # never dispatched again
    assert ended.status is RunStatus.CANCELLED and events_of(ended) == ["assigned"]
    assert int(counter.get(leaseapp.executions_key(run.backend_id)) or 0) == 1


def test_warm_shutdown_yields_and_another_worker_takes_over(
    store: SQLAlchemyStore,
    app: Celery,
    queue: str,
    counter: redis.Redis,
    broker_url: str,
    postgres_url: str,
) -> None:
    """SIGTERM to a ``celery worker -P threads`` running a long leased task:
    the run ends ``lost`` with history ``yielded``, the task is runnable at
    once, and the next runner pass gives it to a second worker."""
    token = uuid.uuid4().hex
    [task] = new_tasks(store, queue, {"duration": 60, "token": token, "then": 0.2})
    first_worker = start_worker_process(
        "leaseapp",
        queues=[queue],
        env=worker_env(broker_url, postgres_url),
        pool="threads",
        concurrency=2,
        name="first",
    )
    try:
        assert tick(store, app, datetime.now(UTC)).published == 1
        [first] = store.get_task_runs(task.id or 0)
        steps = leaseapp.steps_key(first.backend_id)
        wait_until(lambda: int(counter.get(steps) or 0) > 3, 30, "the body to run")
        first_worker.send_signal(signal.SIGTERM)
        first_worker.wait(timeout=20)  # the stopped body lets it exit at once
    finally:
        kill_group(first_worker)
    yielded = run_of(store, first.backend_id)
    assert yielded.status is RunStatus.LOST
    assert events_of(yielded) == ["assigned", "yielded"]
    assert yielded.worker is not None and yielded.worker.startswith("first-")
    [after] = store.get_tasks([task.id or 0])
    assert after.status is TaskStatus.WAITING and after.owner_tag is None
    assert after.next_run <= datetime.now(UTC), "runnable at once"
    assert after.failure_count == 0 and after.average_good_duration is None  # neutral
    with in_process_worker(app, queue):
        assert tick(store, app, datetime.now(UTC)).published == 1
        wait_until(
            lambda: runs_of(store, task.id or 0)[-1].status is RunStatus.EVENTFUL,
            20,
            "the second run to end",
        )
    first_again, second = runs_of(store, task.id or 0)
    assert first_again == yielded
    assert events_of(second) == ["assigned"]
    assert second.worker is not None and not second.worker.startswith("first-")
    assert yielded.ended is not None and second.started is not None
    assert yielded.ended <= datetime.fromisoformat(second.history[0]["at"])
    assert int(counter.get(leaseapp.executions_key(first.backend_id)) or 0) == 1
    assert int(counter.get(leaseapp.executions_key(second.backend_id)) or 0) == 1


def test_kill_9_worker_runs_are_lost_and_run_again(
    store: SQLAlchemyStore,
    app: Celery,
    queue: str,
    counter: redis.Redis,
    broker_url: str,
    postgres_url: str,
) -> None:
    ping_timeout, grace = timedelta(seconds=2), timedelta(seconds=2)
    durations = (3.0, 3.0, 3.0)
    made = add_tasks(store, queue, *durations)
    victim = start_worker_process(
        "leaseapp",
        queues=[queue],
        env=worker_env(broker_url, postgres_url),
        pool="threads",
        concurrency=4,
        name="victim",
    )
    try:
        for (_, run), duration in zip(made, durations, strict=True):
            publish(app, run, queue, duration)
        wait_until(
            lambda: all(run_of(store, r.backend_id).status is RunStatus.STARTED for _, r in made),
            30,
            "the victim to lease every run",
        )
        time.sleep(0.5)
        os.killpg(victim.pid, signal.SIGKILL)
        killed_at = time.monotonic()
    finally:
        kill_group(victim)
    task_ids = [t.id or 0 for t, _ in made]
    rescued: dict[int, float] = {}
    with in_process_worker(app, queue):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(rescued) < len(task_ids):
            monitor_tick(store, ping_timeout=ping_timeout, grace=grace)
            tick(store, app, datetime.now(UTC))
            for task in store.get_tasks(task_ids):
                if task.id not in rescued and task.owner_tag is not None:
                    runs = store.get_task_runs(task.id or 0)
                    if len(runs) == 2:
                        rescued[task.id or 0] = time.monotonic() - killed_at
            time.sleep(0.2)
        assert len(rescued) == len(task_ids), f"not every task ran again: {rescued}"
        wait_until(
            lambda: all(runs_of(store, i)[-1].status is RunStatus.EVENTFUL for i in task_ids),
            15,
            "the second runs to end",
        )
    bound = (ping_timeout + grace).total_seconds() + PING + SLACK
    figures = sorted(round(v, 2) for v in rescued.values())
    print(f"rescue after kill -9 on {broker_url.split(':')[0]}: {figures} s (bound {bound} s)")
    assert max(rescued.values()) <= bound
    for task_id in task_ids:
        first, second = runs_of(store, task_id)
        assert first.status is RunStatus.LOST
        assert events_of(first) == ["assigned", "pinged_late", "stolen"]
        assert events_of(second) == ["assigned"]
        # at no instant two owners: the lost run ended before the next was assigned
        assert first.ended is not None and second.ended is not None
        assigned = datetime.fromisoformat(second.history[0]["at"])
        assert first.ended <= assigned
        assert first.worker != second.worker
        assert int(counter.get(leaseapp.executions_key(first.backend_id)) or 0) == 1
        assert int(counter.get(leaseapp.executions_key(second.backend_id)) or 0) == 1


def test_a_blackout_window_beginning_mid_run_is_a_failure_retried_after_it(
    store: SQLAlchemyStore, app: Celery, queue: str, counter: redis.Redis
) -> None:
    """DESIGN.md §3: a run found inside a blackout window is terminated and
    counted as a failure; the retry waits for the window's end."""
    ensure_type(store, queue)
    # the run must start before the window does (a start inside it is
    # refused): a margin a loaded machine's worker start-up fits in
    start = datetime.now(UTC) + timedelta(seconds=BLACKOUT_AFTER)
    end = start + timedelta(minutes=10)
    window = BlackoutPeriod(start=start.time().replace(tzinfo=None), end=end.time())
    now = datetime.now(UTC) - timedelta(seconds=5)
    [task] = store.create_tasks(
        [
            Task(
                type="leased",
                kwargs={"duration": 30},
                next_run=now,
                deadline=now + timedelta(seconds=1),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(hours=1),
                tz="UTC",
                blackout_periods=(window,),
            )
        ],
        now=now,
    )
    assert tick(store, app, datetime.now(UTC)).published == 1
    [run] = store.get_task_runs(task.id or 0)
    with in_process_worker(app, queue):
        wait_until(
            lambda: run_of(store, run.backend_id).started is not None,
            BLACKOUT_AFTER,
            "the run to start before the blackout",
        )
        wait_until(
            lambda: not run_of(store, run.backend_id).status.is_open,
            BLACKOUT_AFTER + PING + 10,
            "the blackout to stop the run",
        )
    stopped = run_of(store, run.backend_id)
    assert stopped.status is RunStatus.FAILED
    assert stopped.error is not None and "blackout" in stopped.error
    assert stopped.ended is not None and stopped.ended >= start
    assert int(counter.get(leaseapp.executions_key(run.backend_id)) or 0) == 1
    [after] = store.get_tasks([task.id or 0])
    assert after.failure_count == 1 and after.status is TaskStatus.WAITING
    # the retry waits for the window to end (within a second: wall-clock windows)
    assert after.next_run >= end - timedelta(seconds=1)
