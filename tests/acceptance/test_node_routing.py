"""Tasks with ``dont_run_on_nodes`` reach only allowed workers (real worker processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import services
from celery import Celery
from celery.result import AsyncResult

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.dispatch.routing import LiveWorkers
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_workers.sleep import TASK_NAME

pytestmark = [pytest.mark.acceptance, pytest.mark.redis]


def result_backend() -> str:
    return services.redis_side_url()


def start_worker(
    hostname: str, queue: str, broker: str, cwd: Path, db_url: str
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SWH_SCHEDULER_BROKER_URL": broker,
        "SWH_SCHEDULER_DB_URL": db_url,
        "SWH_SCHEDULER_RESULT_BACKEND": result_backend(),
    }
    celery = str(Path(sys.executable).with_name("celery"))
    return subprocess.Popen(
        [
            celery,
            "-A",
            "swh_like_scheduler.celery_app",
            "worker",
            "-Q",
            queue,
            "-n",
            hostname,
            "-P",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "WARNING",
        ],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_workers(app: Celery, queue: str, hostnames: set[str]) -> LiveWorkers:
    workers = LiveWorkers(app, timeout=1.0)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers.refresh(force=True)
        if set(workers.hostnames(queue)) >= hostnames:
            return workers
    raise AssertionError(f"workers {hostnames} did not come up on {queue}")


@pytest.fixture
def app(broker_url: str) -> Iterator[Celery]:
    app = make_app(
        config_module=None,
        broker_url=broker_url,
        result_backend=result_backend(),
        load_workers=False,
    )
    yield app


def test_banned_nodes_never_run_their_tasks(
    app: Celery, broker_url: str, sqlite_url: str, tmp_path: Path
) -> None:
    queue = f"swh-test-route-{uuid.uuid4().hex[:8]}"
    store = SQLAlchemyStore.from_url(sqlite_url)
    store.create_task_type(TaskType(type="route", backend_name=TASK_NAME, queue=queue))
    now = datetime.now(tz=UTC)

    def tasks(tag: str, banned: tuple[str, ...]) -> list[Task]:
        return [
            Task(
                type="route",
                args=(),
                kwargs={"seed": n, "duration": 0},
                key=f"{tag}{n}",
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(hours=1),
                next_run=now,
                deadline=now,
                dont_run_on_nodes=banned,
            )
            for n in range(6)
        ]

    not_a = store.create_tasks(tasks("not-a", ("node-a",)), now=now)
    not_b = store.create_tasks(tasks("not-b", ("node-b",)), now=now)
    free = store.create_tasks(tasks("free", ()), now=now)
    processes = [start_worker("w1@node-a", queue, broker_url, tmp_path, sqlite_url)]
    try:
        workers = wait_for_workers(app, queue, {"w1@node-a"})
        # only node-a is alive: tasks banned from it must wait
        report = tick(store, app, datetime.now(tz=UTC), workers=workers)
        assert report.claimed == 12
        assert {t.status for t in store.get_tasks([t.id or 0 for t in not_a])} == {
            TaskStatus.WAITING
        }
        processes.append(start_worker("w2@node-b", queue, broker_url, tmp_path, sqlite_url))
        workers = wait_for_workers(app, queue, {"w1@node-a", "w2@node-b"})
        report = tick(store, app, datetime.now(tz=UTC), workers=workers)
        assert report.claimed == 6 and not report.errors
        ran_on: dict[int, str] = {}
        for task in [*not_a, *not_b, *free]:
            [run] = store.get_task_runs(task.id or 0)
            result = AsyncResult(run.backend_id, app=app).get(timeout=60)
            ran_on[task.id or 0] = result["worker"]
        assert all(ran_on[t.id or 0] == "w2@node-b" for t in not_a)
        assert all(ran_on[t.id or 0] == "w1@node-a" for t in not_b)
        assert set(ran_on.values()) == {"w1@node-a", "w2@node-b"}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        store.close()
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
