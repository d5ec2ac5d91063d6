"""The fault suite's probe for a worker of the platform's own app:
``celery -A swh_like_scheduler.celery_app worker -I platformprobe``, so the
worker runs with the shipped settings (``task_acks_late``, prefetch 1,
``task_reject_on_worker_lost``, ``worker_direct``) where ``faultapp``'s
worker has its own.

The task has :data:`faultapp.PROBE_TASK`'s name (the harness's ``probe``
type) and counts as that probe does: its start and, after ``duration``
seconds, its completion, per task, in the counter Redis
(``FAULT_COUNTER``, ``FAULT_PREFIX``) that no scenario breaks.
"""

from __future__ import annotations

import os
import time

import redis
from faultapp import PROBE_TASK, completed_key, started_key

from swh_like_scheduler.celery_app import app
from swh_like_scheduler.worker import SchedulerTask

_counter = redis.Redis.from_url(os.environ.get("FAULT_COUNTER", "redis://127.0.0.1:6379/0"))
_prefix = os.environ.get("FAULT_PREFIX", "swh-fault")


@app.task(name=PROBE_TASK, base=SchedulerTask, bind=True, shared=False)
def probe(self: SchedulerTask, index: int, duration: float = 0.0) -> dict[str, str]:
    _counter.hincrby(started_key(_prefix), str(index), 1)
    if duration:
        time.sleep(duration)
    _counter.hincrby(completed_key(_prefix), str(index), 1)
    return {"status": "eventful"}
