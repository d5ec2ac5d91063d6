"""``celery beat -S swh`` keeps the promises ``start-runner`` keeps.

The same scenario runs under each driver, with its default sleep (beat's
``max_interval`` and the runner's ``--period``, both 60 s) and its monitor
duties at their default pace: periodic probe tasks with a 20 s staleness
bound, whose first messages are lost (the queue is purged before any worker
runs); the monitor duty must publish them again, and then every task must
stay OK and run again each period, exactly once at a time (ground truth:
the probe's own counters).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import services
from conftest import full_only
from harness import Platform

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.policy import Condition, condition

pytestmark = [pytest.mark.faults, pytest.mark.postgresql, pytest.mark.redis]

TASKS = 4
PERIOD = "20s"
#: seconds watched once every first run is done: two more periods and a bit
WATCH = 45.0


@full_only()  # a minute per driver at the default pace: the full fault suite
@pytest.mark.parametrize("driver", ["start-runner", "celery-beat"])
def test_beat_keeps_periodic_tasks_fresh_and_republishes_like_the_runner(
    driver: str, postgres_url: str, counter_url: str, tmp_path: Path
) -> None:
    broker = services.require("redis", services.redis_url)
    running = Platform(postgres_url, broker, counter_url, tmp_path)
    app = make_app(config_module=None, broker_url=broker, load_workers=False)
    try:
        # as often as the workers allow (an explicit cooldown of 0, not the
        # default's ~once per period): many runs watched for a run started twice
        ids = running.create_periodic(TASKS, period=PERIOD, cooldown="0")
        running.listener()
        if driver == "start-runner":
            running.runner("runner", "--period", "60", "--monitor-period", "10", "--lock-ttl", "60")
        else:
            running.beat_monitor = {"republish_after": 10}
            running.beat(max_interval=None)
        # no worker yet: the first runs' messages wait in the queue, and are lost
        running.wait_for(
            lambda: queue_depth(app, running.queue) == TASKS, 30, "the first runs published"
        )
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge(running.queue)
        running.worker()
        running.wait_for(
            lambda: len(running.completions()) == TASKS,
            60,
            "the lost first runs published again by the monitor duty, and done",
        )
        task_type = running.store.get_task_type("periodic-probe")
        assert task_type is not None
        watched_from = time.monotonic()
        not_ok: list[str] = []
        while time.monotonic() - watched_from < WATCH:
            now = datetime.now(UTC)
            for task in running.store.get_tasks(ids):
                report = condition(task, task_type, now)
                if report.level is not Condition.OK:
                    not_ok.append(f"{now:%H:%M:%S} task {task.id}: {report.detail}")
            assert all(running.alive(name) for name in running.processes), running.status()
            time.sleep(1.0)
        started, done = running.counts()
        assert not not_ok, not_ok[:5]
        assert sorted(done) == list(range(TASKS))
        assert all(n >= 3 for n in done.values()), done  # the first run and two periods
        # at most one body of a task under way at the instant of the read
        in_flight = {i: started.get(i, 0) - done.get(i, 0) for i in started}
        assert all(0 <= n <= 1 for n in in_flight.values()), ("a run started twice", in_flight)
    finally:
        running.close()
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(running.queue)
