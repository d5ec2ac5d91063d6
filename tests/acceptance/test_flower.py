"""Flower shows our workers and the tasks the runner sent, unchanged."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import services

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_workers.sleep import TASK_NAME

pytestmark = [pytest.mark.acceptance, pytest.mark.redis]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except OSError:
            last = None
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def test_flower_lists_our_worker_and_tasks(sqlite_url: str, tmp_path: Path) -> None:
    broker = services.redis_url()
    queue = f"swh-test-flower-{uuid.uuid4().hex[:8]}"
    hostname = f"flower-{uuid.uuid4().hex[:6]}@localhost"
    port = free_port()
    env = {
        **os.environ,
        "SWH_SCHEDULER_BROKER_URL": broker,
        "SWH_SCHEDULER_DB_URL": sqlite_url,  # the workers' start guard
        "FLOWER_UNAUTHENTICATED_API": "true",
    }
    celery = str(Path(sys.executable).with_name("celery"))
    flower = subprocess.Popen(
        [
            celery,
            "-A",
            "swh_like_scheduler.celery_app",
            "flower",
            f"--port={port}",
            "--address=127.0.0.1",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [
            celery,
            "-A",
            "swh_like_scheduler.celery_app",
            "worker",
            "-Q",
            queue,
            "-n",
            hostname,
            "-E",
            "-P",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "WARNING",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    app = make_app(config_module=None, broker_url=broker, load_workers=False)
    store = SQLAlchemyStore.from_url(sqlite_url)
    try:
        api = f"http://127.0.0.1:{port}/api"
        wait_for("our worker in Flower", lambda: hostname in get_json(f"{api}/workers?refresh=1"))
        store.create_task_type(TaskType(type="flower", backend_name=TASK_NAME, queue=queue))
        now = datetime.now(tz=UTC)
        store.create_tasks(
            [
                Task(
                    type="flower",
                    kwargs={"seed": n},
                    schedule_kind=ScheduleKind.ADAPTIVE,
                    current_interval=timedelta(hours=1),
                    next_run=now,
                    deadline=now,
                )
                for n in range(3)
            ],
            now=now,
        )
        report = tick(store, app, now)
        assert report.published == 3
        sent = {store.get_task_runs(t.id or 0)[0].backend_id for t in store.search_tasks()}

        def succeeded() -> bool:
            tasks = get_json(f"{api}/tasks")
            return all(tasks.get(i, {}).get("state") == "SUCCESS" for i in sent)

        wait_for("the three tasks, succeeded, in Flower", succeeded)
        tasks = get_json(f"{api}/tasks")
        assert {tasks[i]["name"] for i in sent} == {TASK_NAME}
        assert {tasks[i]["worker"] for i in sent} == {hostname}
    finally:
        store.close()
        for process in (worker, flower):
            process.terminate()
        for process in (worker, flower):
            process.wait(timeout=30)
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
