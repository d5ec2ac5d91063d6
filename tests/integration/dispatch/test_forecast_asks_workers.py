"""``swh scheduler forecast --ask-workers``: the worker slots of each queue
as a real Celery worker reports them (``inspect stats``), the queues with
no worker answering assumed to have one, and said so."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import services
from celeryproc import worker_process
from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.redis]

HERE = Path(__file__).parent


def test_the_slots_are_those_the_live_workers_report(sqlite_url: str, broker_url: str) -> None:
    queue = f"swh-test-forecast-{uuid.uuid4().hex[:8]}"
    store = SQLAlchemyStore.from_url(sqlite_url)
    store.create_task_type(TaskType(type="job", backend_name="tests.reserve.work", queue=queue))
    store.create_task_type(TaskType(type="idle", backend_name="x.idle", queue=f"{queue}-idle"))
    now = datetime.now(tz=UTC)
    store.create_tasks(
        [
            Task(
                type="job",
                args=(n,),
                schedule_kind=ScheduleKind.PERIODIC,
                period=timedelta(hours=1),
                next_run=now,
                deadline=now,
                expected_duration=timedelta(seconds=10),
            )
            for n in range(3)
        ],
        now=now,
    )
    env = {"RESERVE_TEST_BROKER": broker_url, "RESERVE_TEST_REDIS": services.redis_url()}
    with worker_process(
        "reserveapp", queues=[queue], env=env, pool="threads", concurrency=3, paths=(HERE,)
    ):
        args = ["--hours", "10 min", "--ask-workers", "--broker-url", broker_url, "--json"]
        for _ in range(3):  # a worker just started may not answer the first broadcast
            result = CliRunner().invoke(
                swh, ["scheduler", "--db-url", sqlite_url, "forecast", *args]
            )
            assert result.exit_code == 0, (result.output, result.stderr)
            data = json.loads(result.stdout)
            if data["base"]["workers"][queue] == 3:
                break
    assert data["base"]["workers"] == {queue: 3, f"{queue}-idle": 1}
    said = " ".join(data["assumptions"])
    assert f"queue {queue}-idle: 1 worker slot(s) assumed, not reported" in said
    assert f"queue {queue}:" not in said
    store.close()
