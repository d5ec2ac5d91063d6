"""The soak's platform: private servers, every daemon as a real process,
the receivers of the jobs' callbacks, the workload and the faults.

Processes: two runners (``--no-monitor``), one ``start-monitor``, two
listeners sharing one event queue, and ``celery worker`` processes per task
type (two for the probe type, one each for ``notify`` and ``webhook``).
Receivers, in this process: an HTTP server that counts the ``webhook``
callbacks by ``Idempotency-Key``, and a consumer that counts the ``notify``
messages by their ``swh-key`` header. Every fault is logged with its
wall-clock start and end, for the checker (:mod:`soakcheck`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import redis
import soakapp
from kombu import Connection
from private import PrivateServer
from processes import HERE, ProcessTable
from soakplan import Fault, JobPlan, Plan

from swh_like_scheduler.builders import task_from_input
from swh_like_scheduler.jobs import Callback, Job
from swh_like_scheduler.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore

SWH = [str(Path(sys.executable).parent / "swh"), "scheduler"]
CELERY = [sys.executable, "-m", "celery", "-A", "soakapp"]
WORK_TYPE = "soak-work"
T = TypeVar("T")

#: worker name -> (queue, concurrency)
WORKERS = {
    "work-1": ("soak-work", 3),
    "work-2": ("soak-work", 2),
    "notify": ("swh_like_workers.notify.notify", 2),
    "webhook": ("swh_like_workers.webhook.post", 2),
}
LISTENERS = ["listener-1", "listener-2"]
DAEMONS = ["runner-1", "runner-2", "monitor", *LISTENERS]
PROCESSES = [*DAEMONS, *WORKERS]


def retrying(what: Callable[[], T], seconds: float = 120.0) -> T:
    """``what()``, tried again while a server it needs is being broken."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return what()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class Receivers:
    """The jobs' callback receivers; counts in the counter's Redis."""

    def __init__(self, counter: redis.Redis, prefix: str, broker_url: str) -> None:
        self.counter, self.prefix, self.broker_url = counter, prefix, broker_url
        self.stop = threading.Event()
        receivers = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                key = self.headers.get("Idempotency-Key") or "?"
                receivers.counter.hincrby(f"{receivers.prefix}:http", key, 1)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *_: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/callback"
        self.threads = [
            threading.Thread(target=self.http.serve_forever, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _consume(self) -> None:
        """Drain the notify queue, counting by ``swh-key`` (reconnecting)."""
        while not self.stop.is_set():
            with contextlib.suppress(Exception), Connection(self.broker_url) as conn:
                queue = conn.SimpleQueue(
                    soakapp.NOTIFY_QUEUE, queue_opts={"durable": True}, serializer="json"
                )
                while not self.stop.is_set():
                    try:
                        message = queue.get(timeout=0.5)
                    except queue.Empty:
                        continue
                    key = (message.headers or {}).get("swh-key") or "?"
                    self.counter.hincrby(f"{self.prefix}:notify", key, 1)
                    message.ack()
            self.stop.wait(0.5)

    def counts(self, kind: str) -> dict[str, int]:
        raw = self.counter.hgetall(f"{self.prefix}:{kind}")
        return {k.decode(): int(v) for k, v in raw.items()}

    def close(self) -> None:
        self.stop.set()
        self.http.shutdown()
        self.http.server_close()


class Soak(ProcessTable):
    """One soak: start it, :meth:`inject` its faults, :meth:`settle`."""

    def __init__(
        self,
        plan: Plan,
        servers: dict[str, PrivateServer],
        *,
        db_url: str,
        broker_url: str,
        result_backend: str | None,
        counter_url: str,
        logs: Path,
    ) -> None:
        super().__init__(logs)
        self.plan, self.servers = plan, servers
        self.db_url, self.broker_url, self.result_backend = db_url, broker_url, result_backend
        self.counter = redis.Redis.from_url(counter_url)
        self.counter_url = counter_url
        self.prefix = f"swh-soak-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.store = SQLAlchemyStore.from_url(db_url)
        self.receivers = Receivers(self.counter, self.prefix, broker_url)
        #: (fault, wall-clock start, wall-clock end)
        self.fault_log: list[tuple[Fault, float, float]] = []
        self.start = 0.0
        #: the ends of the faults that last a while: (wall-clock time, fault, its start)
        self.pending: list[tuple[float, Fault, float]] = []
        #: processes a fault keeps down (not restarted by :meth:`ensure_running`)
        self.held_down: set[str] = set()
        self.tids: dict[int, str] = {}

    # -- processes ------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "SWH_SCHEDULER_DB_URL": self.db_url,
            "SWH_SCHEDULER_BROKER_URL": self.broker_url,
            "SWH_SCHEDULER_RESULT_BACKEND": self.result_backend or "",
            "SOAK_BROKER": self.broker_url,
            "SOAK_COUNTER": self.counter_url,
            "SOAK_PREFIX": self.prefix,
            # the HTTP receiver listens on loopback: allowed for this platform
            "SWH_SCHEDULER_CALLBACK_ALLOW": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH")])
            ),
        }

    def command(self, name: str) -> list[str]:
        if name.startswith("runner"):
            return [*SWH, "start-runner", "--no-monitor", "--period", "1"]
        if name == "monitor":
            return [
                *SWH,
                "start-monitor",
                "--period",
                "1",
                "--lock-ttl",
                "5",
                "--orphaned-after",
                "3",
                "--republish-after",
                "15 s",
                "--offline-grace",
                "10",
            ]
        if name in LISTENERS:
            return [
                *SWH,
                "start-listener",
                "--queue-name",
                f"{self.prefix}-events",
                "--catch-up-every",
                "10",
                "--catch-up-delay",
                "10",
                "--summary-every",
                "30",
            ]
        queue, concurrency = WORKERS[name]
        return [
            *CELERY,
            "worker",
            "-P",
            "prefork",
            "-c",
            str(concurrency),
            "-Q",
            queue,
            "-n",
            f"{name}@%h",
            "-E",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "WARNING",
        ]

    def spawn(self, name: str) -> None:
        self.launch(name, self.command(name))

    def stop_process(
        self, name: str, sig: int, timeout: float = 90.0, *, group: bool = True
    ) -> None:
        """``sig`` to the process (its group, or its main process only), then
        SIGKILL to the group if it is still there after ``timeout``."""
        if group:
            self.signal(name, sig)
        elif self.alive(name):
            os.kill(self.processes[name].pid, sig)
        try:
            self.processes[name].wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(name, signal.SIGKILL)
            self.processes[name].wait(20)

    def ensure_running(self) -> None:
        for name in PROCESSES:
            if name not in self.held_down and not self.alive(name):
                self.spawn(name)

    def close(self) -> None:
        self.stop_all(30)
        self.receivers.close()
        self.store.close()

    # -- the workload -----------------------------------------------------------

    def at(self, offset: float) -> datetime:
        return datetime.fromtimestamp(self.start + offset, UTC)

    def register_types(self) -> None:
        quick = {
            "retry_delay": timedelta(seconds=2),
            "retry_growth": 1.5,
            "retry_cap": timedelta(seconds=10),
            "retry_jitter": timedelta(0),
        }
        self.store.create_task_type(
            TaskType(
                type=WORK_TYPE,
                backend_name=soakapp.WORK_TASK,
                queue="soak-work",
                default_interval=timedelta(seconds=20),
                min_interval=timedelta(seconds=10),
                max_interval=timedelta(seconds=60),
                backoff_factor=1.5,
                max_queue_length=500,
                num_retries=2,
                max_allowed_duration=timedelta(seconds=60),
                **quick,  # type: ignore[arg-type]
            )
        )
        for name, backend in (
            ("notify", "swh_like_workers.notify.notify"),
            ("webhook", "swh_like_workers.webhook.post"),
        ):
            self.store.create_task_type(
                TaskType(
                    type=name,
                    backend_name=backend,
                    default_interval=timedelta(hours=1),
                    max_queue_length=500,
                    num_retries=20,
                    **quick,  # type: ignore[arg-type]
                )
            )

    def create_workload(self) -> None:
        """The recurring tasks and the one-shots (from the soak's start) and
        the jobs; the jobs' replacements and the bursts come later."""
        now = datetime.now(UTC)
        work = self.store.get_task_type(WORK_TYPE)
        assert work is not None
        tasks = [
            task_from_input(
                {
                    "kwargs": {"tid": r.tid, "duration": r.duration, "fail_rate": r.fail_rate},
                    **r.schedule,
                },
                work,
                now=now,
            )
            for r in self.plan.recurring
        ]
        for o in self.plan.oneshots:
            values: dict[str, Any] = {
                "kwargs": {"tid": o.tid, "duration": o.duration},
                "kind": "oneshot",
                "next_run": self.at(o.at).isoformat(),
            }
            if o.max_delay:
                values["max_delay"] = o.max_delay
            tasks.append(task_from_input(values, work, now=now))
        made = self.store.create_tasks(tasks, now=now)
        self.tids = {t.id or 0: t.kwargs["tid"] for t in made}
        for job in self.plan.jobs:
            self.put_job(job, job.instants)

    def job(self, plan: JobPlan, instants: tuple[int, ...]) -> Job:
        if plan.callback == "rabbitmq":
            callback = Callback(
                "rabbitmq", {"queue": soakapp.NOTIFY_QUEUE, "payload": {"job": plan.key}}
            )
        else:
            callback = Callback("http", {"url": self.receivers.url, "payload": {"job": plan.key}})
        return Job(
            key=plan.key,
            schedules=tuple(self.at(float(s)).replace(microsecond=0) for s in instants),
            callback=callback,
        )

    def put_job(self, plan: JobPlan, instants: tuple[int, ...]) -> None:
        retrying(lambda: self.store.put_job(self.job(plan, instants), now=datetime.now(UTC)))

    def burst(self, count: int, n: int) -> None:
        """``count`` one-shots due now: the workload's clock jumps forward."""
        work = self.store.get_task_type(WORK_TYPE)
        assert work is not None
        now = datetime.now(UTC)
        values = [
            {
                "kwargs": {"tid": f"b{n}-{i}", "duration": 0.1},
                "kind": "oneshot",
                "next_run": now.isoformat(),
            }
            for i in range(count)
        ]
        made = retrying(
            lambda: self.store.create_tasks(
                [task_from_input(v, work, now=now) for v in values], now=now
            )
        )
        self.tids.update({t.id or 0: t.kwargs["tid"] for t in made})

    # -- faults ---------------------------------------------------------------------

    def run(self, say: Callable[[str], None]) -> None:
        """Start everything, then inject the faults on schedule; the jobs'
        replacements happen at their offsets, between faults."""
        self.register_types()
        self.start = time.time()
        self.create_workload()
        self.ensure_running()
        replacements = sorted((j.replace_at, j) for j in self.plan.jobs if j.replace_at is not None)
        for n, fault in enumerate(self.plan.faults):
            while replacements and replacements[0][0] <= fault.at:
                _, job = replacements.pop(0)
                self.wait_until(job.replace_at or 0.0)
                self.put_job(job, job.replaced_by)
            self.wait_until(fault.at)
            began = time.time()
            lasting = self.apply(fault, n)
            if lasting:  # it ends later, while the next faults go on
                self.pending.append((began + fault.seconds, fault, began))
                say(f"{fault.describe()} (begun)")
            else:
                self.fault_log.append((fault, began, time.time()))
                say(f"{fault.describe()} (done in {time.time() - began:.1f} s)")
        for _, job in replacements:
            self.wait_until(job.replace_at or 0.0)
            self.put_job(job, job.replaced_by)
        self.wait_until(self.plan.scale.seconds)
        while self.pending:
            self.wait_until(min(at for at, _, _ in self.pending) - self.start)
        self.ensure_running()

    def wait_until(self, offset: float) -> None:
        """Sleep until ``offset`` seconds after the start, ending the faults
        that last a while when their time comes (the schedule's own clock)."""
        target = self.start + offset
        while True:
            now = time.time()
            for item in [p for p in self.pending if p[0] <= now]:
                self.pending.remove(item)
                _, fault, began = item
                self.end(fault)
                self.fault_log.append((fault, began, time.time()))
            if now >= target:
                return
            wake = min([target, *(at for at, _, _ in self.pending)])
            time.sleep(max(0.0, wake - now))

    def end(self, fault: Fault) -> None:
        """The end of a fault that lasts a while."""
        if fault.kind == "listener_down":
            self.held_down.discard(fault.target)
        elif fault.kind == "pause":
            self.signal(fault.target, signal.SIGCONT)
        self.ensure_running()

    def apply(self, fault: Fault, n: int) -> bool:
        """Begin ``fault``; True when it lasts a while (:meth:`end` ends it)."""
        kind, target = fault.kind, fault.target
        if kind == "kill9":  # the whole process group: a worker's pool dies with it
            self.stop_process(target, signal.SIGKILL)
            time.sleep(fault.seconds)
        elif kind == "term":  # the main process only: a worker's warm shutdown
            self.signal(target, signal.SIGCONT)  # a paused worker cannot shut down
            self.stop_process(target, signal.SIGTERM, group=False)
            time.sleep(fault.seconds)
        elif kind == "restart":
            server = self.servers[target]
            server.stop()
            time.sleep(fault.seconds)
            server.start()
        elif kind == "flushall":
            with contextlib.suppress(redis.RedisError):
                redis.Redis.from_url(self.broker_url).flushall()
        elif kind == "listener_down":
            self.held_down.add(target)
            self.stop_process(target, signal.SIGTERM)
            return True
        elif kind == "pause":
            self.signal(target, signal.SIGSTOP)
            return True
        elif kind == "burst":
            self.burst(int(fault.seconds), n)
        else:  # pragma: no cover - the plan makes only these
            raise ValueError(f"unknown fault {kind}")
        self.ensure_running()
        return False

    # -- what happened ----------------------------------------------------------------

    def bodies(self) -> list[dict[str, Any]]:
        raw = self.counter.lrange(soakapp.bodies_key(self.prefix), 0, -1)
        return [json.loads(item) for item in raw]

    def dump(self, runs: list[Any]) -> Path:
        """What happened, for a failing run's post-mortem: the bodies' notes,
        the faults and the runs recorded, as JSON lines in the logs folder."""
        path = self.logs / "history.jsonl"
        with path.open("w") as out:
            for fault, began, ended in self.fault_log:
                line = {"fault": fault.describe(), "began": began, "ended": ended}
                out.write(json.dumps(line) + "\n")
            for body in self.bodies():
                out.write(json.dumps({"body": body}) + "\n")
            for run in runs:
                out.write(json.dumps({"run": run}, default=str) + "\n")
        return path

    def forget(self) -> None:
        self.counter.delete(
            soakapp.bodies_key(self.prefix), f"{self.prefix}:http", f"{self.prefix}:notify"
        )
