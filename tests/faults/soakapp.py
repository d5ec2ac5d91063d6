"""The soak's worker app (``celery -A soakapp worker``).

Configured from the environment: ``SOAK_BROKER``, ``SWH_SCHEDULER_DB_URL``
(the start guard's database), ``SWH_SCHEDULER_RESULT_BACKEND``, ``SOAK_COUNTER``
(a Redis no fault touches) and ``SOAK_PREFIX`` (the soak's keys).

It runs the shipped ``notify`` and ``webhook`` task types (the jobs'
callbacks) and one probe type, :data:`WORK_TASK`, behind the start guard:
its body appends what it did to a list in the counter's Redis — its start,
then, after ``duration`` seconds, its end and its outcome (decided from the
run's id, so the same run always ends the same way) — and then returns
that outcome or raises. Those lists are the soak's ground truth.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time

import redis

import swh_like_workers.notify
import swh_like_workers.webhook
from swh_like_scheduler.celery_factory import make_app
from swh_like_scheduler.worker import SchedulerTask

WORK_TASK = "tests.soak.work"
#: the queue the ``notify`` callbacks of the soak's jobs publish to
NOTIFY_QUEUE = "soak.notifications"


def bodies_key(prefix: str) -> str:
    """The list of what the probe's bodies did, in order."""
    return f"{prefix}:bodies"


def outcome_of(backend_id: str, fail_rate: float) -> str:
    """``failed``, ``eventful`` or ``uneventful``: the same for a run every time."""
    digest = hashlib.md5(backend_id.encode(), usedforsecurity=False).hexdigest()
    draw = int(digest[:8], 16) / 2**32
    if draw < fail_rate:
        return "failed"
    return "eventful" if draw < fail_rate + (1 - fail_rate) / 2 else "uneventful"


class SoakFailure(Exception):
    """A probe body that fails on purpose."""


app = make_app(
    config_module=None,
    broker_url=os.environ.get("SOAK_BROKER", "redis://127.0.0.1:6379/0"),
    load_workers=False,
    broker_connection_timeout=3,
    broker_connection_retry_on_startup=True,
    broker_connection_max_retries=None,
    broker_heartbeat=2,
    worker_hijack_root_logger=False,
    worker_send_task_events=True,
    task_send_sent_event=False,
    result_backend=os.environ.get("SWH_SCHEDULER_RESULT_BACKEND") or None,
    result_expires=3600,
)
# the shipped callbacks' Celery tasks (shared tasks: bound to this app too)
CALLBACK_MODULES = (swh_like_workers.notify, swh_like_workers.webhook)
_counter = redis.Redis.from_url(os.environ.get("SOAK_COUNTER", "redis://127.0.0.1:6379/0"))
_prefix = os.environ.get("SOAK_PREFIX", "swh-soak")


def _note(**fields: object) -> None:
    fields.update(t=time.time(), pid=os.getpid(), node=socket.gethostname())
    _counter.rpush(bodies_key(_prefix), json.dumps(fields))


@app.task(name=WORK_TASK, base=SchedulerTask, bind=True, shared=False)
def work(self: SchedulerTask, tid: str, duration: float = 0.0, fail_rate: float = 0.0) -> object:
    run = str(self.request.id)
    worker = str(self.request.hostname)
    _note(kind="start", tid=tid, run=run, worker=worker)
    if duration:
        time.sleep(duration)
    outcome = outcome_of(run, fail_rate)
    _note(kind="end", tid=tid, run=run, worker=worker, outcome=outcome)
    if outcome == "failed":
        raise SoakFailure(f"{tid}: failing on purpose")
    return {"status": outcome}
