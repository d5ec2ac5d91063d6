"""Faults under a running platform: every task completes exactly once.

Each scenario runs the real daemons (``swh scheduler start-runner``,
``start-listener``, ``celery beat -S swh``) and real ``celery worker``
processes on probe tasks (:mod:`faultapp`), breaks a server or a process,
and asserts from the probes' own counters that no task was lost and none
completed twice, and that the database recorded every one, within a bound
after the fault ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import TABLE, full_only, scale
from harness import Platform, Row
from private import PrivatePostgres, PrivateRabbitMQ, PrivateRedis

pytestmark = [pytest.mark.faults, pytest.mark.postgresql, pytest.mark.redis]

#: seconds a scenario may take to recover once its fault ended
RECOVERY_BOUND = 90.0


@contextlib.contextmanager
def platform(db_url: str, broker_url: str, counter_url: str, logs: Path) -> Iterator[Platform]:
    running = Platform(db_url, broker_url, counter_url, logs)
    try:
        yield running
    finally:
        running.close()


def check(row: Row) -> None:
    TABLE.append(row.to_json())
    assert (row.lost, row.doubled) == (0, 0), row
    assert row.recorded == row.tasks, row
    assert row.recovery_seconds < RECOVERY_BOUND, row


def unpublished_runs(running: Platform) -> int:
    """Runs whose claim committed but whose messages were never sent."""
    with running.store.engine.connect() as conn:
        query = (
            "SELECT count(*) FROM task_run r JOIN dispatch_batch b ON b.id = r.batch_id "
            "WHERE b.published_at IS NULL AND r.status = 'scheduled'"
        )
        return int(conn.scalar(sa.text(query)) or 0)


def rabbitmqctl(server: PrivateRabbitMQ, *args: str) -> None:
    prefix = ["runuser", "-u", "rabbitmq", "--"] if os.geteuid() == 0 else []
    subprocess.run(
        [*prefix, "/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", server.node, *args],
        check=True,
        capture_output=True,
        env=server.environment(),
        timeout=60,
    )


def test_a_runner_killed_between_claim_and_publish(
    postgres_url: str, private_rabbitmq: PrivateRabbitMQ, counter_url: str, logs: Path
) -> None:
    """The broker blocks publishers (a memory alarm): the runner's claim
    commits, its publish hangs, and it is killed there. The orphaned runs
    go out as soon as another runner's monitor duty sees them, once."""
    with platform(postgres_url, private_rabbitmq.url, counter_url, logs) as running:
        count = scale(300, 3000)
        running.create_tasks(count)
        rabbitmqctl(private_rabbitmq, "set_vm_memory_high_watermark", "0")
        running.runner("doomed", "--no-monitor")
        running.wait_for(lambda: unpublished_runs(running) == count, 60, "the claim to commit")
        running.kill("doomed")
        rabbitmqctl(private_rabbitmq, "set_vm_memory_high_watermark", "0.4")
        fault_ended = time.monotonic()
        running.listener()
        running.worker()
        running.runner()
        check(running.outcome("runner SIGKILL after its claim", since=fault_ended, timeout=120))


def test_three_runners_at_once_one_killed(postgres_url: str, counter_url: str, logs: Path) -> None:
    """Three ``start-runner`` processes share tasks falling due over 10 s;
    one is killed (SIGKILL) in the middle: the two others and its orphans'
    re-publication cover everything, and no task runs twice."""
    with platform(postgres_url, counter_url, counter_url, logs) as running:
        count = scale(600, 6000)
        running.create_tasks(count, spread=10.0, duration=0.01)
        running.listener()
        running.worker()
        for name in ("runner-a", "runner-b", "runner-c"):
            running.runner(name)
        running.wait_done(count // 4)
        running.kill("runner-b")
        fault_ended = time.monotonic()
        row = running.outcome("three runners, one SIGKILL", since=fault_ended, timeout=120)
        assert running.alive("runner-a") and running.alive("runner-c")
        check(row)


def test_postgres_restarts_under_runner_listener_and_beat(
    private_postgres: PrivatePostgres, counter_url: str, logs: Path
) -> None:
    """A fast PostgreSQL restart while tasks fall due: the runner, the
    listener and ``celery beat -S swh`` all live on and every task runs."""
    # the broker is not under test here: the shared Redis (counter_url)
    with platform(private_postgres.url, counter_url, counter_url, logs) as running:
        count = scale(200, 2000)
        running.create_tasks(count, spread=20.0, duration=0.05)
        running.listener()
        running.worker()
        running.runner()
        running.beat()
        running.wait_done(count // 5)
        running.store.engine.dispose()
        private_postgres.stop()
        time.sleep(3)  # the outage itself: the daemons must ride it out
        private_postgres.start()
        fault_ended = time.monotonic()
        row = running.outcome(
            "PostgreSQL restart (runner, listener, beat)", since=fault_ended, timeout=150
        )
        alive = {name: running.alive(name) for name in ("runner", "listener", "beat", "worker")}
        assert all(alive.values()), alive
        check(row)


def broken_mid_run(running: Platform, scenario: str, fault: Callable[[], None]) -> None:
    """Probe tasks queued, a listener, a runner and a worker; ``fault``
    once a quarter of the tasks completed; then the row of the table."""
    count = scale(400, 4000)
    running.create_tasks(count, duration=0.02)
    running.listener()
    running.runner()
    running.worker(concurrency=2)
    running.wait_done(count // 4)
    fault()
    check(running.outcome(scenario, since=time.monotonic(), timeout=150))


def test_redis_flushall_mid_run(
    postgres_url: str, private_redis: PrivateRedis, counter_url: str, logs: Path
) -> None:
    """Redis, the broker, loses every key (queued and unacked messages,
    bindings) while work is queued: what was lost is sent again, once."""
    with platform(postgres_url, private_redis.url, counter_url, logs) as running:
        broken_mid_run(running, "Redis FLUSHALL mid-run", private_redis.flushall)


def test_rabbitmq_restart_mid_run(
    postgres_url: str, private_rabbitmq: PrivateRabbitMQ, counter_url: str, logs: Path
) -> None:
    with platform(postgres_url, private_rabbitmq.url, counter_url, logs) as running:
        broken_mid_run(running, "RabbitMQ restart mid-run", private_rabbitmq.restart)


@full_only()
def test_redis_restart_mid_run(
    postgres_url: str, private_redis: PrivateRedis, counter_url: str, logs: Path
) -> None:
    """A Redis that keeps nothing on disk restarts: queues and results gone."""
    with platform(postgres_url, private_redis.url, counter_url, logs) as running:
        broken_mid_run(running, "Redis restart mid-run", private_redis.restart)


@full_only()
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_worker_stopped_mid_run(
    postgres_url: str, private_redis: PrivateRedis, counter_url: str, logs: Path, sig: int
) -> None:
    """SIGTERM: a warm shutdown finishes its runs. SIGKILL: the worker is
    started again under its name; its runs in flight are lost and retried
    (they never completed), nothing completes twice."""
    with platform(postgres_url, private_redis.url, counter_url, logs) as running:
        count = scale(100, 400)
        running.create_tasks(count, duration=0.5)
        running.listener()
        running.runner()
        running.worker("w1", concurrency=4)
        running.wait_done(count // 4)
        running.signal("w1", sig)
        running.processes["w1"].wait(30)
        running.worker("w1", concurrency=4)
        fault_ended = time.monotonic()
        name = "SIGTERM" if sig == signal.SIGTERM else "SIGKILL + restart"
        check(running.outcome(f"worker {name} mid-run", since=fault_ended, timeout=150))


@full_only()
def test_listener_down_for_a_while(
    postgres_url: str, private_rabbitmq: PrivateRabbitMQ, counter_url: str, logs: Path
) -> None:
    """Events wait in the listener's durable queue (RabbitMQ) while it is
    down; the re-publish delay passes meanwhile; nothing runs twice."""
    with platform(postgres_url, private_rabbitmq.url, counter_url, logs) as running:
        count = scale(400, 2000)
        running.create_tasks(count, duration=0.02)
        running.listener()
        running.runner()
        running.worker(concurrency=2)
        running.wait_done(count // 4)
        running.kill("listener")
        time.sleep(15)  # longer than --republish-after (10 s)
        running.listener("listener-again")
        fault_ended = time.monotonic()
        check(running.outcome("listener down 15 s", since=fault_ended, timeout=150))
