"""Two live main processes under one worker name are two workers, not a
restart: neither's runs are ended, and the duplicate name is logged (at most
once a minute per name). Through the listener's handler, then with two real
``celery worker`` processes started with the same ``-n``."""

from __future__ import annotations

import contextlib
import logging
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
import services
from celery import Celery
from monitortest import H, plain_type, run_of
from waiting import delete_queues, wait_until

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskRun, TaskType
from swh_like_scheduler.domain.records import ASSIGNED
from swh_like_scheduler.listener import EventHandler, Listener, ListenerOptions
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore

HERE = Path(__file__).parent
SLEEP_TASK = "swh_like_workers.sleep.sleep"


def guarded_run(store: SQLAlchemyStore, n: int, pid: int, now: datetime, hostname: str) -> TaskRun:
    """A task of type ``plain`` whose run the start guard let through in the
    worker process ``pid`` under ``hostname``."""
    [task] = store.create_tasks(
        [
            Task(
                type="plain",
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=now - H,
                deadline=now,
            )
        ],
        now=now - H,
    )
    run = store.schedule_task_run(task.id or 0, now=now - H)
    name, node = hostname.split("@")
    grant = store.guard_start(run.backend_id, node=node, name=name, tag=f"t{n}", pid=pid)
    assert grant.granted
    return run_of(store, run)


def beat(hostname: str, pid: int, at: float) -> dict[str, object]:
    return {"type": "worker-heartbeat", "hostname": hostname, "timestamp": at, "pid": pid}


def test_two_live_processes_under_one_name_keep_their_runs(
    store: SQLAlchemyStore, now: datetime, caplog: pytest.LogCaptureFixture
) -> None:
    plain_type(store)
    name = f"twin-{uuid.uuid4().hex[:6]}@node-a"  # (the log is once a minute per name)
    first, second = guarded_run(store, 1, 41, now, name), guarded_run(store, 2, 97, now, name)
    handler = EventHandler(store, rng=random.Random(0))
    ts = now.timestamp()
    caplog.set_level(logging.WARNING, "swh_like_scheduler.listener.handler")
    # a minute of heartbeats of both, every 2 s each, in batches of a few
    events = [beat(name, 41 if n % 2 else 97, ts + n) for n in range(60)]
    for start in range(0, len(events), 5):
        assert handler.handle_worker_events(events[start : start + 5]) == []
    for run in (first, second):
        found = run_of(store, run)
        assert found.status is RunStatus.STARTED, found
        [task] = store.get_tasks([found.task_id])
        assert task.owner_tag is not None
    warnings = [r.getMessage() for r in caplog.records if "two live main processes" in r.message]
    assert len(warnings) == 1, warnings  # once a minute per name
    assert "41" in warnings[0] and "97" in warnings[0] and name in warnings[0]
    [state] = [w for w in store.get_workers() if w.hostname == name]
    assert {state.pid, state.other_pid} == {41, 97}
    # 41 stops (kill -9): once it has been silent for the restart silence,
    # its copy is put on notice (taken after the steal grace unless its body's
    # process renews it), and 97's is left alone
    later = [beat(name, 97, ts + 60 + 2 * n) for n in range(8)]
    assert handler.handle_worker_events(later) == []
    assert [h["event"] for h in run_of(store, first).history][-1] == "pinged_late"
    assert [h["event"] for h in run_of(store, second).history] == ["assigned"]
    report = store.steal_expired_leases(ping_timeout=H, grace=timedelta(microseconds=1))
    assert [r.backend_id for r in report.stolen] == [first.backend_id]
    assert run_of(store, first).status is RunStatus.LOST
    assert run_of(store, second).status is RunStatus.STARTED


# -- with real worker processes ---------------------------------------------------


@pytest.fixture
def pg(pg_store: SQLAlchemyStore) -> SQLAlchemyStore:
    return pg_store  # the workers' start guard and the test share the database


@pytest.fixture
def redis_broker() -> str:
    """On Redis: on RabbitMQ the second worker of a name cannot even start
    (its remote-control queue is exclusive to the first one). The case seen
    in the field: two installations, each with its broker, on one database."""
    return services.redis_url()


@pytest.fixture
def app(redis_broker: str) -> Celery:
    return make_app(config_module=None, broker_url=redis_broker, load_workers=False)


@contextlib.contextmanager
def twin_workers(
    broker_url: str, queue: str, store: SQLAlchemyStore, hostname: str
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two ``celery worker`` processes started with the same ``-n hostname``."""
    pythonpath = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    env = {
        **os.environ,
        "MONITOR_TEST_BROKER": broker_url,
        "PYTHONPATH": pythonpath,
        "SWH_SCHEDULER_DB_URL": store.engine.url.render_as_string(hide_password=False),
    }
    argv = [
        *(sys.executable, "-m", "celery", "-A", "twinapp", "worker", "-E"),
        *("-P", "threads", "-c", "2", "-Q", queue, "-n", hostname),
        *("--without-gossip", "--without-mingle", "--loglevel", "WARNING"),
    ]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(2):
            processes.append(
                subprocess.Popen(
                    argv, env=env, cwd=HERE, stdout=subprocess.DEVNULL, start_new_session=True
                )
            )
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


@contextlib.contextmanager
def listening(app: Celery, store: SQLAlchemyStore) -> Iterator[Listener]:
    queue_name = f"celeryev.swh-test-twins-{uuid.uuid4().hex[:8]}"
    options = ListenerOptions(
        queue_name=queue_name, batch_wait=0.05, poll_interval=0.1, wakeup_workers=False
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


def assigned_pid(run: TaskRun) -> int | None:
    pids = [h.get("pid") for h in run.history if h.get("event") == ASSIGNED]
    return pids[-1] if pids and isinstance(pids[-1], int) else None


@pytest.mark.postgresql
@pytest.mark.redis
@pytest.mark.timeout(180)
def test_two_real_workers_under_one_name_lose_no_run(
    pg: SQLAlchemyStore, app: Celery, redis_broker: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Four runs of 14 s, two on each of two workers started with the same
    ``-n``: their heartbeats interleave for longer than the restart silence;
    every run ends with its real outcome (on main the second process's
    first heartbeat was a "restart" that ended the first one's runs)."""
    queue = f"swh-test-twins-{uuid.uuid4().hex[:8]}"
    hostname = f"twin-{uuid.uuid4().hex[:6]}@monitor-test"
    caplog.set_level(logging.WARNING, "swh_like_scheduler.listener.handler")
    pg.create_task_type(
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
    tasks = pg.create_tasks(
        [
            Task(
                type="plain",
                kwargs={"duration": 14, "seed": n},
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=now - H,
                deadline=now,
            )
            for n in range(4)
        ],
        now=now - H,
    )
    try:
        with listening(app, pg), twin_workers(redis_broker, queue, pg, hostname) as workers:
            pids = {p.pid for p in workers}

            def both_online() -> bool:
                state = [w for w in pg.get_workers() if w.hostname == hostname]
                return bool(state) and {state[0].pid, state[0].other_pid} == pids

            wait_until(both_online, 60, "the heartbeats of both workers")
            assert tick(pg, app, datetime.now(UTC)).published == 4

            def runs() -> list[TaskRun]:
                return [r for t in tasks for r in pg.get_task_runs(t.id or 0)]

            def all_assigned() -> bool:  # the listener may mark a run started
                found = runs()  # from task-started before its guard recorded the owner
                return all(r.status is RunStatus.STARTED and assigned_pid(r) for r in found)

            wait_until(all_assigned, 30, "4 runs started and assigned")
            assert {assigned_pid(r) for r in runs()} == pids  # two on each
            started = time.monotonic()
            wait_until(lambda: not any(r.status.is_open for r in runs()), 60, "the runs to end")
            assert time.monotonic() - started > 8  # they ran past the restart silence
            ended = runs()
    finally:
        delete_queues(app, queue)
    assert [r.status for r in ended] == [RunStatus.EVENTFUL] * 4, ended
    assert len(ended) == 4  # nothing dispatched again
    warnings = [r.getMessage() for r in caplog.records if "two live main processes" in r.message]
    assert warnings and all(str(pid) in warnings[0] for pid in pids), warnings
