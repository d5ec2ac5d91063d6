"""A paused type's tasks fall due while it is paused; after the resume, a
real runner (``swh scheduler start-runner``, a subprocess) dispatches them
in deadline order and never more than the type's ``max_queue_length`` at a
time, while a real worker drains the queue (PostgreSQL, Redis broker)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
import services
import sqlalchemy as sa
from celery.contrib.testing.worker import start_worker
from runnertest import executed_key, make_test_app, new_type
from waiting import delete_queues as purge
from waiting import wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.tables import task_run

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]

ROOM = 10
TASKS = 60


def test_resume_dispatches_by_deadline_within_the_queue_bound(
    pg_store: SQLAlchemyStore, postgres_url: str
) -> None:
    app = make_test_app(services.redis_url())
    recorder = redis.Redis.from_url(services.redis_url())
    task_type = new_type(pg_store, ROOM)
    queue, key = task_type.effective_queue, executed_key(task_type.effective_queue)
    now = datetime.now(tz=UTC)
    due = now + timedelta(seconds=1)  # not due yet when paused: they fall due while paused
    pg_store.pause_task_type(task_type.type, now=now)
    pg_store.create_tasks(
        [
            Task(
                type=task_type.type,
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(hours=1),
                next_run=due,
                deadline=due + timedelta(minutes=(n * 37) % TASKS),  # shuffled, distinct
            )
            for n in range(TASKS)
        ],
        now=now,
    )
    swh = Path(sys.executable).parent / "swh"
    options = ["-t", task_type.type, "--period", "0.2", "--no-monitor"]
    options += ["--broker-url", services.redis_url()]
    runner = subprocess.Popen(
        [str(swh), "scheduler", "--db-url", postgres_url, "start-runner", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    logged: list[str] = []
    reading = threading.Thread(target=lambda: logged.extend(runner.stdout or ()), daemon=True)
    reading.start()
    depths: list[int] = []
    try:
        wait_until(lambda: any("paused since" in line for line in logged), 30, "the runner")
        wait_until(lambda: datetime.now(tz=UTC) > due + timedelta(seconds=1), 5, "the tasks due")
        assert len(pg_store.list_pending(task_type.type, now=datetime.now(tz=UTC))) == TASKS
        assert queue_depth(app, queue) == 0  # nothing went out while paused

        pg_store.resume_task_type(task_type.type)
        # no worker yet: the first passes fill the queue up to its bound, no further
        wait_until(lambda: queue_depth(app, queue) == ROOM, 30, f"{ROOM} messages")
        assert scheduled(pg_store) == ROOM
        wait_until(lambda: sum("resumed" in line for line in logged) >= 1, 10, "a pass")
        assert queue_depth(app, queue) == ROOM and scheduled(pg_store) == ROOM

        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                depths.append(queue_depth(app, queue))
                stop.wait(0.02)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        with start_worker(
            app, pool="solo", perform_ping_check=False, queues=[queue], loglevel="WARNING"
        ):
            wait_until(lambda: recorder.llen(key) >= TASKS, 120, f"{TASKS} executions")
        stop.set()
        watcher.join()
    finally:
        runner.send_signal(signal.SIGTERM)
        try:
            runner.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - reported by the asserts
            os.killpg(runner.pid, signal.SIGKILL)
        recorder.delete(key)
        purge(app, queue)
        recorder.close()
    assert max(depths) <= ROOM, depths
    # each claim (a dispatch batch) took at most ROOM tasks, the earliest
    # deadlines first: every batch's deadlines come before the next one's
    with pg_store.engine.connect() as conn:
        found = conn.execute(
            sa.select(task_run.c.batch_id, task_run.c.task_id).order_by(task_run.c.batch_id)
        ).all()
    deadlines = {t.id: t.deadline for t in pg_store.search_tasks(limit=1000)}
    batches: dict[int, list[datetime]] = {}
    for batch_id, task_id in found:
        batches.setdefault(batch_id, []).append(deadlines[task_id])
    assert len(found) == TASKS and len({t for _, t in found}) == TASKS  # each once
    assert max(len(b) for b in batches.values()) <= ROOM
    assert len(batches) >= TASKS // ROOM
    ordered = list(batches.values())
    for earlier, later in itertools.pairwise(ordered):
        assert max(earlier) <= min(later), (earlier, later)


def scheduled(store: SQLAlchemyStore) -> int:
    return sum(t.status is TaskStatus.SCHEDULED for t in store.search_tasks(limit=1000))
