"""``celery -A swh_like_scheduler.celery_app beat -S swh`` runs the runner's passes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
import services
from waiting import wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.domain.enums import TaskStatus
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.index import RedisIndex
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.values import TaskFilter

pytestmark = [pytest.mark.acceptance, pytest.mark.redis]


def _ready_tasks(store: SQLAlchemyStore, task_type: str, count: int) -> None:
    """``count`` hourly adaptive tasks of ``task_type``, all ready now."""
    now = datetime.now(tz=UTC)
    store.create_tasks(
        [
            Task(
                type=task_type,
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(hours=1),
                next_run=now,
                deadline=now,
            )
            for n in range(count)
        ],
        now=now,
    )


def _start_beat(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    """``celery beat -S swh`` in ``tmp_path``, and the file of its log."""
    celery = str(Path(sys.executable).with_name("celery"))
    log = tmp_path / "beat.log"
    with log.open("w") as out:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [celery, "-A", "swh_like_scheduler.celery_app", "beat", "-S", "swh", "-l", "INFO"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return process, log


@pytest.mark.parametrize("indexed", [False, True], ids=["database", "index"])
def test_celery_beat_with_our_scheduler_dispatches_ready_tasks(
    sqlite_url: str, tmp_path: Path, indexed: bool
) -> None:
    broker = services.redis_url()
    queue = f"swh-test-beat-{uuid.uuid4().hex[:8]}"
    store = SQLAlchemyStore.from_url(sqlite_url)
    store.create_task_type(TaskType(type="beat-test", backend_name="x.y", queue=queue))
    _ready_tasks(store, "beat-test", 25)
    store.close()
    env = {**os.environ, "SWH_SCHEDULER_DB_URL": sqlite_url, "SWH_SCHEDULER_BROKER_URL": broker}
    index = RedisIndex(redis.Redis.from_url(broker))  # the default prefix, as beat's
    if indexed:
        env["SWH_SCHEDULER_INDEX_URL"] = broker
        index.client.delete(*index.keys("beat-test").all())  # left by an earlier run
    process, log = _start_beat(tmp_path, env)
    app = make_app(config_module=None, broker_url=broker, load_workers=False)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and queue_depth(app, queue) < 25:
            assert process.poll() is None, log.read_text()
            time.sleep(0.1)
        assert queue_depth(app, queue) == 25
        if indexed:  # the rebuild runs beside the passes, in a thread of its own
            wait_until(
                lambda: "index of beat-test rebuilt" in log.read_text(), 60, "the index rebuilt"
            )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        output = log.read_text()
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
    assert "swh_like_scheduler runner" in output
    # with the index, beat found it empty and built it (the tasks went out
    # from the database meanwhile)
    assert ("index of beat-test rebuilt" in output) is indexed
    if indexed:
        assert index.is_complete("beat-test")
        index.client.delete(*index.keys("beat-test").all())


def test_sigterm_during_a_pass_lets_it_finish_then_beat_stops(
    sqlite_url: str, tmp_path: Path
) -> None:
    """SIGTERM while beat publishes a large pass (its chunks reach the queue
    one after the other): the pass ends first, so every task the database
    marks dispatched is in the queue, then beat exits 0. Under Celery's own
    handler, which stops beat wherever it is, the same run left 5,000 tasks
    claimed and 1,000 published (the rest waited for the monitor to publish
    them again), and a transaction cut in the middle could leave SQLite's
    write lock held, so that closing waited 30 s for it."""
    broker = services.redis_url()
    queue = f"swh-test-beat-{uuid.uuid4().hex[:8]}"
    count = 12000
    store = SQLAlchemyStore.from_url(sqlite_url)
    store.create_task_type(TaskType(type="beat-big", backend_name="x.y", queue=queue))
    _ready_tasks(store, "beat-big", count)
    env = {**os.environ, "SWH_SCHEDULER_DB_URL": sqlite_url, "SWH_SCHEDULER_BROKER_URL": broker}
    env.pop("SWH_SCHEDULER_INDEX_URL", None)
    app = make_app(config_module=None, broker_url=broker, load_workers=False)
    process, log = _start_beat(tmp_path, env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and queue_depth(app, queue) == 0:
            assert process.poll() is None, log.read_text()
            time.sleep(0.005)
        depth_at_signal = queue_depth(app, queue)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        output = log.read_text()
        depth = queue_depth(app, queue)
    finally:
        if process.poll() is None:
            process.kill()
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
    assert code == 0, output
    dispatched = store.count_tasks(TaskFilter(status=[TaskStatus.SCHEDULED]))
    store.close()
    assert depth_at_signal > 0, output
    assert dispatched == depth, (dispatched, depth, output)
    if depth_at_signal < count:  # the signal came during the pass
        assert "stopping after the step under way" in output
