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

The stall probes (:data:`STALL_TASK` behind the start guard,
:data:`LEASED_STALL_TASK` behind the lease) work in small steps and keep
notes (:func:`notes_key`: start, end, or stopped, with the run, the process
and the fencing token, on the wall clock). Their completion is a fenced side
effect, as a careful body writes one: a per-task register keeps the largest
token that started, and a completion counts (``completed``) only under that
token; a stale copy's completion is refused (``refused``).
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

PROBE_TASK = "tests.faults.probe"
STALL_TASK = "tests.faults.stall"
LEASED_STALL_TASK = "tests.faults.stall_leased"


def started_key(prefix: str) -> str:
    return f"{prefix}:started"


def completed_key(prefix: str) -> str:
    return f"{prefix}:completed"


def refused_key(prefix: str) -> str:
    return f"{prefix}:refused"


def notes_key(prefix: str) -> str:
    return f"{prefix}:notes"


def fence_key(prefix: str, index: int) -> str:
    return f"{prefix}:fence:{index}"


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
    # each running body renews its run (and a lease pings) this often
    swh_scheduler_lease_ping=float(os.environ.get("FAULT_PING") or "1"),
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


#: the register of the largest token that started (KEYS[1]: fence, ARGV[1]: token)
_FENCED_START = _counter.register_script(
    """
    local top = tonumber(redis.call('GET', KEYS[1]) or '0')
    if tonumber(ARGV[1]) > top then redis.call('SET', KEYS[1], ARGV[1]) end
    return top
    """
)
#: a completion under the largest token counts, any other is refused
#: (KEYS: fence, completed, refused; ARGV: token, task)
_FENCED_END = _counter.register_script(
    """
    local top = tonumber(redis.call('GET', KEYS[1]) or '0')
    if tonumber(ARGV[1]) >= top then
        redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
        return 1
    end
    redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
    return 0
    """
)


def _note(index: int, event: str, run: str, token: int, **more: Any) -> None:
    note = {"task": index, "event": event, "run": run, "pid": os.getpid(), "token": token}
    _counter.rpush(notes_key(_prefix), json.dumps({**note, **more, "t": time.time()}))


def _stepped(self: SchedulerTask, index: int, steps: int, step: float) -> dict[str, str]:
    fence = getattr(self, "fence", None)  # (none before fencing tokens: every token 0)
    token = fence.token if fence is not None else 0
    run = str(self.request.id)
    _FENCED_START(keys=[fence_key(_prefix, index)], args=[token])
    _counter.hincrby(started_key(_prefix), str(index), 1)
    _note(index, "start", run, token)
    try:
        for _ in range(steps):  # steps, not a deadline: a stopped process resumes its count
            time.sleep(step)
    except BaseException as stop:
        _note(index, "stopped", run, token, why=type(stop).__name__)
        raise
    keys = [fence_key(_prefix, index), completed_key(_prefix), refused_key(_prefix)]
    accepted = _FENCED_END(keys=keys, args=[token, str(index)])
    _note(index, "end", run, token, accepted=bool(accepted))
    return {"status": "eventful"}


@app.task(name=STALL_TASK, base=SchedulerTask, bind=True, shared=False)
def stall(self: SchedulerTask, index: int, steps: int = 100, step: float = 0.05) -> dict[str, str]:
    return _stepped(self, index, steps, step)


@app.task(name=LEASED_STALL_TASK, base=LeasedTask, bind=True, shared=False)
def stall_leased(
    self: LeasedTask, index: int, steps: int = 100, step: float = 0.05
) -> dict[str, str]:
    return _stepped(self, index, steps, step)
