"""Faults under runners that use the Redis index (``--index-url``): every
task completes exactly once, counted by the probes themselves, whatever
happens to the index's Redis or to a runner."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from conftest import full_only, scale
from harness import Platform
from private import PrivateRedis
from test_faults import check

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus
from swh_like_scheduler.index import RedisIndex

pytestmark = [pytest.mark.faults, pytest.mark.postgresql, pytest.mark.redis]

#: probe numbers of the tasks filed stale in the index (never to run)
STALE = 1_000_000


def logged(logs: Path, text: str) -> bool:
    return any(text in path.read_text(errors="replace") for path in logs.glob("runner-*.log"))


def test_three_indexed_runners_one_killed_then_the_index_flushed(
    postgres_url: str, private_redis: PrivateRedis, counter_url: str, logs: Path
) -> None:
    """Three runners on the index share tasks falling due over 20 s; one is
    killed (SIGKILL) mid-run, then the index's Redis loses everything
    (FLUSHALL) and more tasks fall due, and five tasks the database holds
    disabled are filed in the index by hand as ready: every probe task
    runs once, the disabled ones never."""
    running = Platform(postgres_url, counter_url, counter_url, logs, index_url=private_redis.url)
    try:
        count = scale(600, 6000)
        running.create_tasks(count, spread=20.0, duration=0.01)
        index = RedisIndex(redis.Redis.from_url(private_redis.url))
        running.listener()
        running.worker()
        for name in ("runner-a", "runner-b", "runner-c"):
            running.runner(name)
        running.wait_for(lambda: index.is_complete("probe"), 60, "a runner to build the index")
        running.wait_done(count // 4)
        running.kill("runner-b")
        running.wait_done(count // 2)
        private_redis.flushall()
        fault_ended = time.monotonic()
        # more work falling due after the flush: claimed from the database
        # until a runner has rebuilt the index, then through it
        running.create_tasks(count // 2, spread=10.0, duration=0.01)
        # stale entries: tasks the database holds disabled, filed as ready
        running.wait_for(lambda: index.is_complete("probe"), 60, "the index to be rebuilt")
        now = datetime.now(UTC)
        later = [
            Task(
                type="probe",
                args=(STALE + n,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=now + timedelta(hours=1),
                deadline=now + timedelta(hours=2),
            )
            for n in range(5)
        ]
        stale = running.store.create_tasks(later, now=now)
        running.store.disable_tasks([t.id or 0 for t in stale], now=now)
        index.put("probe", [t.updated(next_run=now, deadline=now) for t in stale])
        row = running.outcome(
            "indexed runners: one SIGKILL, index FLUSHALL", since=fault_ended, timeout=120
        )
        assert not [n for n in running.completions() if n >= STALE]  # never ran
        assert all(
            t.status is TaskStatus.DISABLED
            for t in running.store.get_tasks([t.id or 0 for t in stale])
        )
        assert running.alive("runner-a") and running.alive("runner-c")
        assert logged(logs, "index of probe rebuilt")
        check(row)
    finally:
        running.close()


@full_only()
def test_the_index_redis_restarts_mid_dispatch(
    postgres_url: str, private_redis: PrivateRedis, counter_url: str, logs: Path
) -> None:
    """The index's Redis (no persistence) restarts while tasks fall due:
    the runners claim from the database meanwhile, rebuild, carry on."""
    running = Platform(postgres_url, counter_url, counter_url, logs, index_url=private_redis.url)
    try:
        count = 3000
        running.create_tasks(count, spread=20.0, duration=0.01)
        index = RedisIndex(redis.Redis.from_url(private_redis.url))
        running.listener()
        running.worker()
        running.runner("runner-a")
        running.runner("runner-b")
        running.wait_for(lambda: index.is_complete("probe"), 60, "a runner to build the index")
        running.wait_done(count // 3)
        private_redis.restart()
        fault_ended = time.monotonic()
        row = running.outcome(
            "indexed runners: index Redis restart", since=fault_ended, timeout=120
        )
        assert running.alive("runner-a") and running.alive("runner-b")
        check(row)
    finally:
        running.close()
