"""Workers that go away (DESIGN.md §4, "Stalls and fencing"), end to end: a
real ``celery worker`` subprocess, the listener, the monitor, real PostgreSQL
and a real broker. A run's copy is alive while the process running its body
renews it (every half second here): a worker offline, or its main process
silent, loses no run whose body still runs; a killed one loses its runs
once the monitor's ping timeout and grace have passed."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from celery import Celery
from waiting import delete_queues, wait_until

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import (
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.listener import Listener, ListenerOptions
from swh_like_scheduler.monitor import MonitorSettings, monitor_tick
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.postgresql]
HERE = Path(__file__).parent
H = timedelta(hours=1)
S = timedelta(seconds=1)
SLEEP_TASK = "swh_like_workers.sleep.sleep"


@pytest.fixture
def store(pg_store: SQLAlchemyStore) -> SQLAlchemyStore:
    return pg_store  # these tests need PostgreSQL


@pytest.fixture
def app(broker_url: str) -> Celery:
    return make_app(config_module=None, broker_url=broker_url, load_workers=False)


@pytest.fixture
def queue(app: Celery) -> Iterator[str]:
    name = f"swh-test-monitor-{uuid.uuid4().hex[:8]}"
    yield name
    delete_queues(app, name)


@contextlib.contextmanager
def listening(app: Celery, store: SQLAlchemyStore) -> Iterator[Listener]:
    """The listener in a thread, on its own event queue, until the block ends."""
    queue_name = f"celeryev.swh-test-monitor-{uuid.uuid4().hex[:8]}"
    options = ListenerOptions(
        queue_name=queue_name,
        batch_wait=0.05,
        poll_interval=0.1,
        retry_delay=0.5,
        wakeup_workers=False,
    )
    listener = Listener(app, store, rng=random.Random(0), options=options)
    thread = threading.Thread(target=listener.run, name="listener", daemon=True)
    thread.start()
    try:
        wait_until(listener.ready.is_set, 15, "the listener")
        yield listener
    finally:
        listener.stop.set()
        thread.join(timeout=20)
        delete_queues(app, queue_name)


@contextlib.contextmanager
def worker_process(
    broker_url: str, queue: str, store: SQLAlchemyStore
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``celery -A monitorapp worker -E`` in its own session; killed at the end."""
    hostname = f"victim-{uuid.uuid4().hex[:6]}@monitor-test"
    pythonpath = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "monitorapp", "worker", "-E"),
            *("-P", "threads", "-c", "2", "-Q", queue, "-n", hostname),
            *("--without-gossip", "--without-mingle", "--loglevel", "WARNING"),
        ],
        env={
            **os.environ,
            "MONITOR_TEST_BROKER": broker_url,
            "PYTHONPATH": pythonpath,
            "SWH_SCHEDULER_DB_URL": store.engine.url.render_as_string(hide_password=False),
        },
        cwd=HERE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield process, hostname
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


def dispatch_sleep(store: SQLAlchemyStore, app: Celery, queue: str, duration: float) -> Task:
    """One plain task sleeping ``duration`` s, claimed and published by a runner pass."""
    store.create_task_type(
        TaskType(
            type="plain",
            backend_name=SLEEP_TASK,
            queue=queue,
            default_interval=H,
            min_interval=timedelta(minutes=10),
            max_interval=timedelta(days=1),
            backoff_factor=2.0,
        )
    )
    now = datetime.now(UTC)
    [task] = store.create_tasks(
        [
            Task(
                type="plain",
                kwargs={"duration": duration},
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=now - H,
                deadline=now,
            )
        ],
        now=now - H,
    )
    assert tick(store, app, now).published == 1
    return task


def the_run(store: SQLAlchemyStore, task: Task) -> TaskRun:
    [run] = store.get_task_runs(task.id or 0)
    return run


def started_on(store: SQLAlchemyStore, task: Task, hostname: str) -> TaskRun:
    """Wait until the run started on ``hostname`` and its heartbeat was recorded."""
    wait_until(
        lambda: (
            the_run(store, task).status is RunStatus.STARTED
            and any(w.hostname == hostname and w.online for w in store.get_workers())
        ),
        30,
        "the run to start and the worker's heartbeat to be recorded",
    )
    run = the_run(store, task)
    assert run.worker == hostname
    return run


def assert_runnable_again(store: SQLAlchemyStore, task: Task, run: TaskRun) -> None:
    lost = store.get_task_run(run.backend_id)
    assert lost is not None and lost.status is RunStatus.LOST
    assert [h["event"] for h in lost.history][-2:] == ["pinged_late", "stolen"]
    [after] = store.get_tasks([task.id or 0])
    now = datetime.now(UTC)
    assert after.status is TaskStatus.WAITING and after.next_run <= now
    assert after.failure_count == 0
    [claimed] = store.claim_ready_tasks("plain", now=now, limit=10)
    assert claimed.task_id == task.id and claimed.backend_id != run.backend_id


def test_kill_9_worker_loses_its_run_once_its_copy_is_silent_past_the_grace(
    store: SQLAlchemyStore, app: Celery, queue: str, broker_url: str
) -> None:
    settings = MonitorSettings(
        worker_timeout=timedelta(seconds=60),  # the main process's silence decides nothing
        ping_timeout=2 * S,
        grace=S,
        lock_ttl=5 * S,
        period=S,
    )
    with listening(app, store), worker_process(broker_url, queue, store) as (process, hostname):
        task = dispatch_sleep(store, app, queue, 60)
        run = started_on(store, task, hostname)
        wait_until(
            lambda: store.get_tasks([task.id or 0])[0].owner_last_ping_at is not None,
            10,
            "the body's process to renew its run",
        )
        os.killpg(process.pid, signal.SIGKILL)  # no worker-offline event
        killed_at = time.monotonic()
        process.wait(timeout=10)
        assert monitor_tick(store, settings=settings).is_monitor

        def rescued() -> bool:
            return bool(monitor_tick(store, settings=settings).steal.stolen)

        wait_until(rescued, 15, "the monitor to take the run")
        waited = time.monotonic() - killed_at
    # the last renewal came half a second or less before the kill
    assert waited <= (settings.ping_timeout + settings.grace).total_seconds() + 3, waited
    assert_runnable_again(store, task, run)


def test_warm_shutdown_mid_run_records_the_real_outcome(
    store: SQLAlchemyStore, app: Celery, queue: str, broker_url: str
) -> None:
    """SIGTERM: Celery says ``worker-offline`` at once, then finishes the
    run. The monitor, passing all the while, waits for the run to report
    (``offline_grace``): the run ends with its real outcome, never ``lost``."""
    settings = MonitorSettings(lock_ttl=5 * S, period=S)  # the default grace
    with listening(app, store), worker_process(broker_url, queue, store) as (process, hostname):
        task = dispatch_sleep(store, app, queue, 4)
        run = started_on(store, task, hostname)
        process.send_signal(signal.SIGTERM)
        wait_until(
            lambda: not any(w.hostname == hostname and w.online for w in store.get_workers()),
            15,
            "the worker-offline event",
        )

        def ended() -> bool:
            assert not monitor_tick(store, settings=settings).offline.lost
            return not the_run(store, task).status.is_open

        wait_until(ended, 20, "the run to end")
        process.wait(timeout=20)
    done = store.get_task_run(run.backend_id)
    assert done is not None and done.status is RunStatus.EVENTFUL
    assert done.worker == hostname and done.progress == 1.0
    [after] = store.get_tasks([task.id or 0])
    assert after.status is TaskStatus.WAITING and after.last_good_end_at == done.ended
    assert after.owner_tag is None


def test_an_offline_worker_whose_body_renews_its_run_loses_nothing(
    store: SQLAlchemyStore, app: Celery, queue: str, broker_url: str
) -> None:
    """A warm shutdown (``worker-offline`` at once, then the run finishes),
    with an offline grace and a worker timeout far shorter than the run's
    remaining work: the body's process renews the run, so the monitor never
    ends it ``lost``; its real outcome is recorded once (on 7132d9b the
    monitor ended it ``lost`` after the grace, and the task was free to run
    again while the body ran)."""
    settings = MonitorSettings(
        lock_ttl=5 * S,
        period=S,
        offline_grace=timedelta(seconds=0.5),
        worker_timeout=S,
        ping_timeout=3 * S,
        grace=2 * S,
    )
    with listening(app, store), worker_process(broker_url, queue, store) as (process, hostname):
        task = dispatch_sleep(store, app, queue, 6)
        run = started_on(store, task, hostname)
        process.send_signal(signal.SIGTERM)

        def ended() -> bool:
            report = monitor_tick(store, settings=settings)
            assert not report.offline.lost and not report.steal.stolen
            return not the_run(store, task).status.is_open

        wait_until(ended, 30, "the run to end")
        process.wait(timeout=20)
    done = store.get_task_run(run.backend_id)
    assert done is not None and done.status is RunStatus.EVENTFUL
    assert "stolen" not in [h["event"] for h in done.history]
    [after] = store.get_tasks([task.id or 0])
    assert after.last_good_end_at == done.ended and after.status is TaskStatus.WAITING
    assert [r.backend_id for r in store.get_task_runs(task.id or 0)] == [run.backend_id]
