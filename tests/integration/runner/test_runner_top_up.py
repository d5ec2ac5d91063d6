"""A queue that never runs dry while work is due: with a small
``max_queue_length`` and a long period, the runner tops a type's queue up as
soon as a real worker has drained it to its low-water mark, on Redis and on
RabbitMQ, rather than at its next period. Counted from the executions the
task itself recorded."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import redis
import services
from celery.contrib.testing.worker import start_worker
from runnertest import executed_key, make_test_app, new_type, ready_tasks
from waiting import delete_queues, wait_until

from swh_like_scheduler.dispatch.serve import PassReport
from swh_like_scheduler.runner import loop
from swh_like_scheduler.runner.wakeup import SleepWaker
from swh_like_scheduler.store import SQLAlchemyStore

#: the runner's period: far longer than the whole test may take
PERIOD = 120.0
TASKS = 24
LIMIT = 4


def test_the_runner_tops_a_draining_queue_up_before_its_period(
    broker_url: str, sqlite_url: str
) -> None:
    recorder = redis.Redis.from_url(services.require("redis", services.redis_url))
    store = SQLAlchemyStore.from_url(sqlite_url)
    app = make_test_app(broker_url)
    task_type = new_type(store, LIMIT)
    queue = task_type.effective_queue
    key = executed_key(queue)
    recorder.delete(key)
    now = datetime.now(tz=UTC) - timedelta(seconds=1)
    store.create_tasks(list(ready_tasks(task_type, TASKS, now)), now=now)
    stop = threading.Event()
    passes: list[PassReport] = []
    # no notification channel, and a poll as long as the period: only a
    # drained queue can start a pass early
    waker = SleepWaker(stop, poll=PERIOD)
    steps = loop.RunnerLoop(store, app, period=PERIOD, on_pass=passes.append)
    runner = threading.Thread(target=loop.run, args=(steps, waker), kwargs={"stop": stop})
    try:
        runner.start()
        wait_until(lambda: passes, 20, "the first pass")
        first = passes[0].types[0]
        assert first.claimed == LIMIT and first.filled
        started = time.monotonic()
        with start_worker(
            app,
            pool="threads",
            concurrency=1,
            perform_ping_check=False,
            queues=[queue],
            shutdown_timeout=30,
        ):
            wait_until(lambda: recorder.llen(key) >= TASKS, 60, f"{TASKS} executions")
        took = time.monotonic() - started
        # every task ran once, in several top-ups, each long before the period
        executed = [v.decode() for v in recorder.lrange(key, 0, -1)]
        assert len(executed) == len(set(executed)) == TASKS
        assert len(passes) >= TASKS // LIMIT
        assert took < PERIOD / 2, f"{took:.1f} s: the queue waited for the runner's period"
        topped = [p for p in passes[1:] if p.types and p.types[0].claimed]
        assert topped and all(p.types[0].claimed <= LIMIT for p in topped)
    finally:
        stop.set()
        runner.join(timeout=30)
        delete_queues(app, queue)
        recorder.delete(key)
        store.close()
    assert not runner.is_alive()


@pytest.mark.redis
def test_a_queue_not_draining_waits_for_the_period(sqlite_url: str) -> None:
    """No worker: the queue stays at its limit, the runner keeps reading its
    depth and does not pass again (the period bounds the wait)."""
    store = SQLAlchemyStore.from_url(sqlite_url)
    app = make_test_app(services.redis_url())
    task_type = new_type(store, LIMIT)
    now = datetime.now(tz=UTC) - timedelta(seconds=1)
    store.create_tasks(list(ready_tasks(task_type, 2 * LIMIT, now)), now=now)
    stop = threading.Event()
    passes: list[PassReport] = []
    steps = loop.RunnerLoop(store, app, period=PERIOD, on_pass=passes.append)
    runner = threading.Thread(
        target=loop.run, args=(steps, SleepWaker(stop, poll=PERIOD)), kwargs={"stop": stop}
    )
    try:
        runner.start()
        wait_until(lambda: passes, 20, "the first pass")
        time.sleep(3 * loop.DRAIN_POLL)  # several depth reads: none low enough
        assert len(passes) == 1
    finally:
        stop.set()
        runner.join(timeout=30)
        delete_queues(app, task_type.effective_queue)
        store.close()
