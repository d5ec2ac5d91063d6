"""The soak's worker app (``celery -A soakapp worker``).

Configured from the environment: ``SOAK_BROKER``, ``SWH_SCHEDULER_DB_URL``
(the start guard's database), ``SWH_SCHEDULER_RESULT_BACKEND``, ``SOAK_COUNTER``
(a Redis no fault touches), ``SOAK_PREFIX`` (the installation's keys) and
``SOAK_BEAT`` (how often a body's process renews its run).

It runs the shipped ``notify`` and ``webhook`` task types (the jobs'
callbacks) and one probe type, :data:`WORK_TASK`, behind the start guard.
Each execution of its body (one start of it in one process) keeps notes in
the counter's Redis, the soak's ground truth:

* ``start``: its own id (``exec``), the run, the process and its parent
  (the worker's main process), the fencing token (:attr:`SchedulerTask.fence`);
* ``end``: after ``duration`` seconds of work, in steps of 0.05 s (so that a
  :class:`~swh_like_scheduler.worker.RunTaken` raised in the body lands
  within a step), its outcome (decided from the run's id: the same run
  always ends the same way); a good one made its side effect, after its
  ``self.fence.check()`` passed (``checked``), and says whether the
  register below took it (``accepted``);
* ``stopped``: the body was stopped by an exception (``why``), while it
  wrote its start (``where``: ``start``), while it worked (``work``), by
  its fence check, which refused its side effect (``check``: the copy
  fenced itself, ``LeaseLost``, or its run was taken, ``RunTaken``), or
  while it wrote (``effect``: when the write went through, its ``end`` note
  is already there and comes first).

Before its side effect a good body asks the platform whether it still
owns its run (``self.fence.check()``, as the reliability page tells a body
to): a stale copy is refused there, and the checker counts every side
effect made past that check as a completion. The side effect itself is
also written as a careful body writes one: a register per task keeps the
largest token that started, and a write counts there only under that token
(``accepted``). That register is the sink's own defence and decides
nothing for the checker: a write it refused was still made by a copy the
platform let through. The register, the counters and the note change in
one script, so that no note is missing for a side effect done, and none is
written for one not done.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid

import redis
from soakplan import outcome_of

import swh_like_workers.notify
import swh_like_workers.webhook
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.worker import SchedulerTask

WORK_TASK = "tests.soak.work"
#: the queue the ``notify`` callbacks of the soak's jobs publish to
NOTIFY_QUEUE = "soak.notifications"


#: seconds of one step of a body's work
STEP = 0.05


def bodies_key(prefix: str) -> str:
    """The list of what the probe's bodies did, in order."""
    return f"{prefix}:bodies"


def fence_key(prefix: str, task_id: int) -> str:
    """The register of the largest token that started on a task."""
    return f"{prefix}:fence:{task_id}"


def completed_key(prefix: str) -> str:
    """Completions accepted, per task id."""
    return f"{prefix}:completed"


def refused_key(prefix: str) -> str:
    """Completions refused by the fence, per task id."""
    return f"{prefix}:refused"


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
    # each running body renews its run this often (the soak's monitor takes
    # a run after its ping timeout and grace: soakplan.TIMEOUTS)
    swh_scheduler_lease_ping=float(os.environ.get("SOAK_BEAT") or "2"),
)
# the shipped callbacks' Celery tasks (shared tasks: bound to this app too)
CALLBACK_MODULES = (swh_like_workers.notify, swh_like_workers.webhook)
_counter = redis.Redis.from_url(os.environ.get("SOAK_COUNTER", "redis://127.0.0.1:6379/0"))
_prefix = os.environ.get("SOAK_PREFIX", "swh-soak")


#: a start: the register keeps the largest token (KEYS: fence, notes; ARGV: token, note)
_FENCED_START = _counter.register_script(
    """
    local top = tonumber(redis.call('GET', KEYS[1]) or '0')
    if tonumber(ARGV[1]) > top then redis.call('SET', KEYS[1], ARGV[1]) end
    redis.call('RPUSH', KEYS[2], ARGV[2])
    return top
    """
)
#: a good end: its completion counts under the largest token, any other is
#: refused; the note says which (KEYS: fence, completed, refused, notes;
#: ARGV: token, task id, note)
_FENCED_END = _counter.register_script(
    """
    local top = tonumber(redis.call('GET', KEYS[1]) or '0')
    local note = cjson.decode(ARGV[3])
    if tonumber(ARGV[1]) >= top then
        redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
        note['accepted'] = true
    else
        redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
        note['accepted'] = false
    end
    redis.call('RPUSH', KEYS[4], cjson.encode(note))
    return note['accepted'] and 1 or 0
    """
)


def _note(kind: str, base: dict[str, object], **more: object) -> str:
    return json.dumps({**base, **more, "kind": kind, "t": time.time()})


@app.task(name=WORK_TASK, base=SchedulerTask, bind=True, shared=False)
def work(self: SchedulerTask, tid: str, duration: float = 0.0, fail_rate: float = 0.0) -> object:
    fence = self.fence
    run = str(self.request.id)
    notes = bodies_key(_prefix)
    base: dict[str, object] = {
        "exec": uuid.uuid4().hex,
        "tid": tid,
        "task": fence.task_id,
        "token": fence.token,
        "run": run,
        "worker": str(self.request.hostname),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "node": socket.gethostname(),
        "duration": duration,
    }
    register = fence_key(_prefix, fence.task_id)
    stage = "start"  # where an exception that stops the body lands
    try:
        # (a stop may land right after the script ran, its reply unread: the
        # start is written, so the stop must be too; a stop note with no
        # start, the script not run, tells of no execution)
        _FENCED_START(keys=[register, notes], args=[fence.token, _note("start", base)])
        stage = "work"
        for _ in range(round(duration / STEP)):  # steps: a stopped process resumes its count
            time.sleep(STEP)
        outcome = outcome_of(run, fail_rate)
        if outcome == "failed":  # no side effect
            _counter.rpush(notes, _note("end", base, outcome=outcome))
            raise SoakFailure(f"{tid}: failing on purpose")
        stage = "check"
        fence.check()  # the platform's word, right before the side effect
        stage = "effect"  # (a stop landing in the write: the end note, if written, comes first)
        keys = [register, completed_key(_prefix), refused_key(_prefix), notes]
        note = _note("end", base, outcome=outcome, checked=True)
        _FENCED_END(keys=keys, args=[fence.token, fence.task_id, note])
    except SoakFailure:
        raise
    except BaseException as stop:  # RunTaken, LeaseLost (told, or refused by the check), ...
        _counter.rpush(notes, _note("stopped", base, why=type(stop).__name__, where=stage))
        raise
    return {"status": outcome}
