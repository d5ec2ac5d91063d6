"""The worker app of the self-fencing scenarios (``celery -A fenceapp worker``).

Configured from the environment: ``FENCE_BROKER``, ``SWH_SCHEDULER_DB_URL``
(the start guard's database: through a freezable proxy in the partition
scenario), ``FENCE_REDIS`` (where the bodies note what they did: a Redis no
scenario touches), ``FENCE_PREFIX`` (the scenario's keys) and
``FENCE_PING`` (seconds between two renewals of a body's run).

One task, :data:`PROBE_TASK`, behind the start guard. Its body is the
ground truth of the scenarios: it notes (wall clock, process, fencing
token) when it starts, waits while the test holds it (:func:`hold_key`),
works ``work`` seconds in small steps, then makes its **side effect** (a
count per task, :func:`effects_key`), right after ``self.fence.check()``
where the start guard offers one: a copy that no longer owns its run is
refused there. Notes: ``start``, ``effect`` (then ``end``), ``refused``
(the check said no), ``stopped`` (something was raised in the body while it
worked: the heartbeat's stop).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import redis

from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.worker import SchedulerTask
from swh_like_scheduler.worker.lease import LeasedTask

PROBE_TASK = "tests.fence.probe"
#: the same body on a class that lets it run on when its run is taken
#: (``stop_when_taken = False``): only its ``fence.check()`` stands between
#: a stale copy and its side effect
RUN_ON_TASK = "tests.fence.probe_run_on"
#: the same body behind the lease (:class:`LeasedTask`: pings, final write)
LEASED_TASK = "tests.fence.probe_leased"


def notes_key(prefix: str) -> str:
    return f"{prefix}:notes"


def effects_key(prefix: str) -> str:
    return f"{prefix}:effects"


def hold_key(prefix: str, index: int) -> str:
    """While set, the body of task ``index`` waits before its work."""
    return f"{prefix}:hold:{index}"


app = make_app(
    config_module=None,
    broker_url=os.environ.get("FENCE_BROKER", "redis://127.0.0.1:6379/0"),
    load_workers=False,
    broker_connection_timeout=3,
    broker_connection_retry_on_startup=True,
    broker_heartbeat=2,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
    worker_send_task_events=True,
    task_send_sent_event=False,
    swh_scheduler_lease_ping=float(os.environ.get("FENCE_PING") or "0.5"),
)
_redis = redis.Redis.from_url(os.environ.get("FENCE_REDIS", "redis://127.0.0.1:6379/0"))
_prefix = os.environ.get("FENCE_PREFIX", "swh-fence")


def _note(index: int, event: str, run: str, token: int, **more: Any) -> None:
    note = {"task": index, "event": event, "run": run, "pid": os.getpid(), "token": token}
    _redis.rpush(notes_key(_prefix), json.dumps({**note, **more, "t": time.time()}))


class RunOnTask(SchedulerTask):
    stop_when_taken = False


@app.task(name=PROBE_TASK, base=SchedulerTask, bind=True, shared=False)
def probe(self: SchedulerTask, index: int, work: float = 0.0, step: float = 0.05) -> dict[str, str]:
    return _probe(self, index, work, step)


@app.task(name=RUN_ON_TASK, base=RunOnTask, bind=True, shared=False)
def probe_run_on(
    self: SchedulerTask, index: int, work: float = 0.0, step: float = 0.05
) -> dict[str, str]:
    return _probe(self, index, work, step)


@app.task(name=LEASED_TASK, base=LeasedTask, bind=True, shared=False)
def probe_leased(
    self: LeasedTask, index: int, work: float = 0.0, step: float = 0.05
) -> dict[str, str]:
    return _probe(self, index, work, step)


def _probe(self: SchedulerTask, index: int, work: float, step: float) -> dict[str, str]:
    fence = self.fence
    run = str(self.request.id)
    _note(index, "start", run, fence.token)
    checked = False
    try:
        while _redis.exists(hold_key(_prefix, index)):
            time.sleep(step)
        for _ in range(round(work / step)):  # steps: a stopped process resumes its count
            time.sleep(step)
        checked = True
        check = getattr(fence, "check", None)  # (none before fence.check() existed)
        if check is not None:
            check()
        _redis.hincrby(effects_key(_prefix), str(index), 1)  # the side effect
        _note(index, "effect", run, fence.token)
    except BaseException as stop:
        _note(index, "refused" if checked else "stopped", run, fence.token, why=repr(stop))
        raise
    _note(index, "end", run, fence.token)
    return {"status": "eventful"}
