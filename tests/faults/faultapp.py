"""The fault suite's worker app (``celery -A faultapp worker``).

Configured from the environment: ``FAULT_BROKER`` (the broker under test),
``SWH_SCHEDULER_DB_URL`` (the start guard's database), ``FAULT_COUNTER``
(a Redis outside the faults, where the task body counts what it did) and
``FAULT_PREFIX`` (the scenario's keys).

One task type, :data:`PROBE_TASK`, behind the start guard as every shipped
type is: it counts its start and, after ``duration`` seconds of work, its
completion, per task (its first argument), in two Redis hashes. That is
the ground truth of the suite: a task completed twice ran twice, one never
completed was lost, whatever the scheduler's tables say.
"""

from __future__ import annotations

import json
import os
import time

import redis

from swh_like_scheduler.celery_factory import make_app
from swh_like_scheduler.worker import SchedulerTask

PROBE_TASK = "tests.faults.probe"


def started_key(prefix: str) -> str:
    return f"{prefix}:started"


def completed_key(prefix: str) -> str:
    return f"{prefix}:completed"


app = make_app(
    config_module=None,
    broker_url=os.environ.get("FAULT_BROKER", "redis://127.0.0.1:6379/0"),
    load_workers=False,
    broker_connection_timeout=3,
    broker_connection_retry_on_startup=True,
    broker_connection_max_retries=None,
    broker_heartbeat=2,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=4,
    worker_send_task_events=True,
    task_send_sent_event=False,
    result_backend=os.environ.get("SWH_SCHEDULER_RESULT_BACKEND") or None,
    result_expires=600,
    # the monitor's duties in ``celery beat -S swh`` (harness: Platform.beat_monitor)
    swh_scheduler_monitor=json.loads(os.environ.get("FAULT_BEAT_MONITOR") or "true"),
)
_counter = redis.Redis.from_url(os.environ.get("FAULT_COUNTER", "redis://127.0.0.1:6379/0"))
_prefix = os.environ.get("FAULT_PREFIX", "swh-fault")


@app.task(name=PROBE_TASK, base=SchedulerTask, bind=True, shared=False)
def probe(self: SchedulerTask, index: int, duration: float = 0.0) -> dict[str, str]:
    _counter.hincrby(started_key(_prefix), str(index), 1)
    if duration:
        time.sleep(duration)
    _counter.hincrby(completed_key(_prefix), str(index), 1)
    return {"status": "eventful"}
