"""One Redis as broker and result backend, shut down mid-run: the bodies
that ended while it was down succeeded, and are recorded so, once each.

Celery stores a task's result before it reports success; when the store
fails, it reports the task failed, and a type with retries runs it again.
The probe counts what its bodies did; the scheduler must agree with it.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa
from conftest import TABLE, scale
from harness import Platform
from private import PrivateRedis

pytestmark = [pytest.mark.faults, pytest.mark.postgresql, pytest.mark.redis]


def logged(logs: Path, name: str, text: str) -> bool:
    path = logs / f"{name}.log"
    return path.exists() and text in path.read_text(errors="replace")


def test_a_result_backend_down_when_bodies_end_decides_no_outcome(
    postgres_url: str, private_redis: PrivateRedis, counter_url: str, logs: Path
) -> None:
    running = Platform(
        postgres_url, private_redis.url, counter_url, logs, result_backend=private_redis.url
    )
    try:
        count = scale(24, 80)
        running.create_tasks(count, duration=2.0)
        running.listener()
        running.runner()
        running.worker(concurrency=4)
        running.wait_for(lambda: running.starts() >= 4, 60, "four bodies under way")
        in_flight = running.starts()
        with contextlib.suppress(redis.ConnectionError):  # SHUTDOWN closes the connection
            redis.Redis.from_url(private_redis.url).shutdown(nosave=True)
        private_redis.kill()  # the process is gone already: reap it
        # the bodies under way end while the backend is down; Celery gives
        # up storing their results (its own retries take about 20 s)
        running.wait_for(
            lambda: len(running.completions()) >= in_flight, 60, "the bodies under way ended"
        )
        running.wait_for(
            lambda: logged(logs, "worker", "could not store its SUCCESS state"),
            90,
            "the worker to give up storing a result",
        )
        private_redis.start()
        fault_ended = time.monotonic()
        row = running.outcome(
            "Redis broker and result backend shut down (NOSAVE) as bodies end",
            since=fault_ended,
            timeout=150,
        )
        with running.store.engine.connect() as conn:
            failed_runs = conn.scalar(
                sa.text("SELECT count(*) FROM task_run WHERE status = 'failed'")
            )
            failures = conn.scalar(sa.text("SELECT coalesce(sum(failure_count), 0) FROM task"))
        TABLE.append({**row.to_json(), "wrong_outcomes": failed_runs})
        assert (row.lost, row.doubled) == (0, 0), row
        assert row.recorded == row.tasks, row
        # every body succeeded (the probe never fails): no run says otherwise
        assert (failed_runs, failures) == (0, 0), running.status()
    finally:
        running.close()
