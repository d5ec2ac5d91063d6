"""A wave of long tasks no longer takes every worker slot: the runner reads
the live worker's pool size (``inspect stats``), keeps a quarter of its
slots from long runs while shorter tasks are due, and the short tasks run
beside the long ones instead of after them (counted by the worker's task
itself, in Redis)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
import services
from celery import Celery
from celery.contrib.testing.app import TestApp
from celeryproc import worker_process
from waiting import delete_queues, wait_until

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.dispatch.routing import LiveWorkers
from swh_like_scheduler.domain.enums import LONG_RUN
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore, TaskFilter

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]

HERE = Path(__file__).parent
TASK_NAME = "tests.reserve.work"
SLOTS = 4
LONG, SHORT = 6, 12
#: what the long runs really take here (their tasks say two hours)
LONG_SECONDS = 6.0


@pytest.fixture
def counts() -> Iterator[tuple[redis.Redis, str]]:
    client = redis.Redis.from_url(services.require("redis", services.redis_url))
    key = f"swh-test-reserve:{uuid.uuid4().hex[:8]}"
    yield client, key
    for name in client.scan_iter(f"{key}:*"):
        client.delete(name)


def tasks(task_type: TaskType, key: str, now: datetime) -> list[Task]:
    """Long tasks due first (the deadline order alone would send them all
    first), then short ones."""
    made = []
    for n in range(LONG + SHORT):
        long = n < LONG
        made.append(
            Task(
                type=task_type.type,
                args=("long" if long else "short", LONG_SECONDS if long else 0.2, key, n),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=now - timedelta(minutes=5),
                deadline=now - timedelta(minutes=5 if long else 1) + timedelta(seconds=n),
                expected_duration=2 * LONG_RUN if long else timedelta(seconds=1),
            )
        )
    return made


def test_long_runs_leave_a_quarter_of_the_slots_to_the_short_tasks_due(
    pg_store: SQLAlchemyStore, broker_url: str, counts: tuple[redis.Redis, str]
) -> None:
    client, key = counts
    queue = f"swh-test-reserve-{uuid.uuid4().hex[:8]}"
    task_type = pg_store.create_task_type(
        TaskType(type=queue, backend_name=TASK_NAME, queue=queue, max_queue_length=100)
    )
    now = datetime.now(tz=UTC)
    pg_store.create_tasks(tasks(task_type, key, now), now=now)
    app: Celery = TestApp(broker=broker_url, set_as_current=False)
    env = {"RESERVE_TEST_BROKER": broker_url, "RESERVE_TEST_REDIS": services.redis_url()}
    try:
        with worker_process(
            "reserveapp",
            queues=[queue],
            env=env,
            pool="threads",
            concurrency=SLOTS,
            paths=(HERE,),
            extra=["--prefetch-multiplier", "1"],
        ):
            workers = LiveWorkers(app, timeout=1.0)

            def heard() -> bool:
                workers.refresh(force=True)
                return workers.slots(queue) is not None

            wait_until(heard, 60, "the worker's pool size")
            assert workers.slots(queue) == SLOTS
            # a short task falling due in ten minutes: slots are kept for it too
            [soon] = pg_store.create_tasks(
                [
                    Task(
                        type=task_type.type,
                        args=("short", 0.2, key, -1),
                        schedule_kind=ScheduleKind.ONESHOT,
                        next_run=now + timedelta(minutes=10),
                        deadline=now + timedelta(minutes=10),
                        expected_duration=timedelta(seconds=1),
                    )
                ],
                now=now,
            )
            report = tick(pg_store, app, datetime.now(tz=UTC), workers=workers, slots=workers.slots)
            # one slot of four kept: three long runs, then every short task
            [served] = report.types
            assert (served.claimed, served.reserved) == (3 + SHORT, True)
            assert not report.held
            waiting = pg_store.search_tasks(
                TaskFilter(type=task_type.type, status=[TaskStatus.WAITING])
            )
            assert len(waiting) == LONG - 3 + 1
            # what the worker did: the short tasks all ended while the long
            # runs still ran, never more than three of which ran at once
            wait_until(
                lambda: client.lrange(f"{key}:order", 0, -1).count(b"short") == SHORT,
                60,
                "the short tasks to run",
            )
            ended = client.lrange(f"{key}:order", 0, -1)
            assert b"long" not in ended, ended
            # a pass while they run takes no long task (none has ended, as
            # far as the store knows: no listener here)
            again = tick(pg_store, app, datetime.now(tz=UTC), workers=workers, slots=workers.slots)
            assert again.claimed == 0 and again.types[0].reserved and not again.held
            assert again.next_ready is not None  # soon again, not at once
            assert again.next_ready - again.now == timedelta(seconds=10)
            assert int(client.get(f"{key}:peak:long") or 0) == 3
            # no shorter task waiting any more, but the short ones dispatched
            # still count (no listener here: as far as the store knows they
            # run, and a periodic one would come back): still kept
            assert soon.id is not None and pg_store.delete_tasks([soon.id]) == 1
            kept = tick(pg_store, app, datetime.now(tz=UTC), workers=workers, slots=workers.slots)
            assert (kept.claimed, kept.types[0].reserved) == (0, True)
            # the short ones gone (as done one-shots are): the long ones
            # take every slot
            dispatched = pg_store.search_tasks(
                TaskFilter(type=task_type.type, status=[TaskStatus.SCHEDULED])
            )
            shorts = [t.id for t in dispatched if t.args[0] == "short"]
            assert len(shorts) == SHORT and pg_store.delete_tasks(shorts) == SHORT
            last = tick(pg_store, app, datetime.now(tz=UTC), workers=workers, slots=workers.slots)
            assert (last.claimed, last.types[0].reserved) == (LONG - 3, False)
            wait_until(
                lambda: client.lrange(f"{key}:order", 0, -1).count(b"long") == LONG,
                60,
                "the long runs to end",
            )
            assert int(client.get(f"{key}:peak:long") or 0) == SLOTS
    finally:
        delete_queues(app, queue)
