"""The soak's platform: private servers, every daemon as a real process,
the receivers of the jobs' callbacks, the workload, and the faults on
their schedule (:mod:`soakfaults` begins and ends them).

Processes: two runners (``--no-monitor``), one ``start-monitor``, two
listeners sharing their default event queue, and ``celery worker``
processes per task type (two for the probe type, one each for ``notify``
and ``webhook``); later a second installation (:mod:`soakother`) on the
same broker. Each probe worker reaches PostgreSQL through a proxy of its
own (:mod:`freezeproxy`, frozen by the ``db_partition`` fault); a runner may
run under libfaketime for a while (``skewed_runner``). Every process
started, signalled or seen gone, and every server stopped, started or
emptied (a worker's proxy frozen: its own server down), is written in the
journal (:mod:`soaklife`), for the checker.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import redis
import soakapp
import soakfaults
import sqlalchemy as sa
from freezeproxy import FreezableProxy
from private import PrivateServer
from processes import HERE, ProcessTable
from soaklife import (
    CONT,
    EXIT,
    FAKETIME,
    KILL,
    SPAWN,
    STOP_GROUP,
    STOP_MAIN,
    SUFFIX,
    TERM,
    Happening,
    Life,
    worker_of,
)
from soakother import OtherInstallation
from soakplan import TIMEOUTS, Fault, JobPlan, Plan
from soakrecv import Receivers

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.intake.jobs import Callback, Job
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
#: the probe workers: their bodies leave notes; each reaches the database
#: through its own proxy
PROBES = [name for name, (queue, _) in WORKERS.items() if queue == WORK_TYPE]
RUNNERS = ["runner-1", "runner-2"]
LISTENERS = ["listener-1", "listener-2"]
DAEMONS = [*RUNNERS, "monitor", *LISTENERS]
PROCESSES = [*DAEMONS, *WORKERS]
#: a second process under a worker's name (the ``twin`` fault): ``work-1~twin3``
TWIN = f"{SUFFIX}twin"


def faketime() -> str | None:
    """libfaketime's ``faketime`` command, if this machine has it."""
    return shutil.which("faketime")


@functools.cache
def faketime_preload() -> str:
    """The library ``faketime -f`` preloads (``LD_PRELOAD``, as it sets it).

    A skewed runner is started with that library and ``FAKETIME`` in its own
    environment rather than under the ``faketime`` command: the command
    forks the program and waits for it, so a signal to the process the soak
    started (a warm shutdown's SIGTERM to the main process alone) would
    reach the wrapper and orphan the runner, which would go on dispatching
    under no one's watch."""
    command = faketime()
    assert command is not None, "no faketime on this machine"
    shown = subprocess.run(
        [command, "-f", "+0s", "env"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    for line in shown.splitlines():
        if line.startswith("LD_PRELOAD="):
            return line.split("=", 1)[1]
    raise AssertionError(f"faketime sets no LD_PRELOAD: {shown!r}")


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


def monitor_options() -> list[str]:
    t = TIMEOUTS
    return [
        *("--ping-timeout", str(t.ping_timeout), "--grace", str(t.grace)),
        *("--worker-timeout", str(t.worker_timeout), "--offline-grace", str(t.offline_grace)),
    ]


class Soak(ProcessTable):
    """One soak: :meth:`run` it (faults on schedule), then check."""

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
        other_db_url: str | None = None,
    ) -> None:
        super().__init__(logs)
        self.plan, self.servers = plan, servers
        self.db_url, self.broker_url, self.result_backend = db_url, broker_url, result_backend
        self.counter = redis.Redis.from_url(counter_url)
        self.counter_url = counter_url
        self.prefix = f"swh-soak-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.store = SQLAlchemyStore.from_url(db_url)
        self.receivers = Receivers(self.counter, self.prefix, broker_url)
        self.other = OtherInstallation(other_db_url, f"{self.prefix}-x") if other_db_url else None
        #: (fault, wall-clock start, wall-clock end)
        self.fault_log: list[tuple[Fault, float, float]] = []
        self.journal: list[Happening] = []
        #: the probe bodies under way (:meth:`busy`), from the notes read so far
        self.running: dict[str, dict[str, Any]] = {}
        self.read_upto = 0
        #: the processes seen gone (written in the journal once)
        self.gone: set[int] = set()
        self.start = 0.0
        #: the faults that last a while: (wall-clock end, fault, its start, its state)
        self.pending: list[tuple[float, Fault, float, dict[str, Any]]] = []
        #: processes a fault keeps down (not restarted by :meth:`ensure_running`)
        self.held_down: set[str] = set()
        #: processes being stopped or kept down a moment by a fault under way
        #: (another fault's end, meanwhile, must not start them again)
        self.resting: set[str] = set()
        #: processes :meth:`ensure_running` keeps running
        self.kept = list(PROCESSES)
        self.tids: dict[int, str] = {}
        #: the jobs' replacements still to make: (seconds after the start, job)
        self.replacements: list[tuple[float, JobPlan]] = []
        #: the soak's own PostgreSQL is stopped by a fault (``restart``): the
        #: soak's writes (a job's replacement) wait until it is started again
        self.database_down = False
        #: each probe worker's way to PostgreSQL (``db_partition`` freezes it)
        url = sa.engine.make_url(db_url)
        self.proxies = {
            name: FreezableProxy(url.host or "127.0.0.1", url.port or 5432) for name in PROBES
        }
        #: runners started under libfaketime, and by how many seconds
        self.skewed: dict[str, int] = {}

    # -- the journal ----------------------------------------------------------

    def note(self, name: str, pid: int, what: str, detail: str = "") -> None:
        self.journal.append(Happening(time.time(), name, pid, what, detail))

    def life(self) -> Life:
        return Life(self.journal)

    # -- processes ------------------------------------------------------------

    def environment(self, name: str | None = None) -> dict[str, str]:
        """The environment of every process, or of process ``name`` (a probe
        worker's database through its proxy)."""
        proxy = self.proxies.get(worker_of(name)) if name is not None else None
        skewed = {}
        if name in self.skewed:  # libfaketime: its clock moved, its monotonic clock true
            preload = [faketime_preload(), os.environ.get("LD_PRELOAD", "")]
            skewed = {
                "LD_PRELOAD": " ".join(filter(None, preload)),
                "FAKETIME": f"{self.skewed[name]:+d}s",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            }
        return {
            **os.environ,
            "SWH_SCHEDULER_DB_URL": proxy.url(self.db_url) if proxy else self.db_url,
            "SWH_SCHEDULER_BROKER_URL": self.broker_url,
            "SWH_SCHEDULER_RESULT_BACKEND": self.result_backend or "",
            "SOAK_BROKER": self.broker_url,
            "SOAK_COUNTER": self.counter_url,
            "SOAK_PREFIX": self.prefix,
            "SOAK_BEAT": str(TIMEOUTS.beat),
            # the HTTP receiver listens on loopback: allowed for this platform
            "SWH_SCHEDULER_CALLBACK_ALLOW": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH")])
            ),
            **skewed,
        }

    def command(self, name: str) -> list[str]:
        if self.other is not None and name.startswith("x-"):
            return self.other.command(name, SWH, CELERY)
        if name.startswith("runner"):
            return [*SWH, "start-runner", "--no-monitor", "--period", "1"]
        if name == "monitor":
            return [
                *SWH,
                "start-monitor",
                *("--period", "1", "--lock-ttl", "5", "--orphaned-after", "3"),
                *("--republish-after", "15 s"),
                *monitor_options(),
            ]
        if name in LISTENERS:  # their default event queue (shared: one database)
            return [
                *SWH,
                "start-listener",
                *("--catch-up-every", "10", "--catch-up-delay", "10", "--summary-every", "30"),
            ]
        worker = name.split(TWIN)[0]
        queue, concurrency = WORKERS[worker]
        return [
            *CELERY,
            "worker",
            *("-P", "prefork", "-c", str(concurrency), "-Q", queue),
            *("-n", f"{worker}@%h", "-E"),
            *("--without-gossip", "--without-mingle", "--loglevel", "WARNING"),
        ]

    def spawn(self, name: str) -> None:
        env = self.environment(name)
        if self.other is not None and name.startswith("x-"):
            env = self.other.environment(self.environment())
        process = self.launch(name, self.command(name), env)
        skew = f"{FAKETIME} {self.skewed[name]:+d}s" if name in self.skewed else ""
        self.note(name, process.pid, SPAWN, skew)

    def pid(self, name: str) -> int:
        return self.processes[name].pid

    def signal(self, name: str, sig: int) -> None:
        """``sig`` to the group of ``name``, written in the journal (a
        SIGCONT before it is sent, a stop or a kill once sent)."""
        if not self.alive(name):
            return
        pid = self.pid(name)
        if sig == signal.SIGCONT:
            self.note(name, pid, CONT)
        super().signal(name, sig)
        if sig == signal.SIGSTOP:
            self.note(name, pid, STOP_GROUP)
        elif sig == signal.SIGKILL:
            self.note(name, pid, KILL)

    def signal_main(self, name: str, sig: int) -> None:
        """``sig`` to the main process of ``name`` alone."""
        if not self.alive(name):
            return
        pid = self.pid(name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        what = {int(signal.SIGSTOP): STOP_MAIN, int(signal.SIGTERM): TERM}.get(int(sig), "signal")
        self.note(name, pid, what)

    def stop_process(
        self, name: str, sig: int, timeout: float = 90.0, *, group: bool = True
    ) -> None:
        """``sig`` to the process (its group, or its main process only), then
        SIGKILL to the group if it is still there after ``timeout``; the
        faults due meanwhile end on time (:meth:`idle`)."""
        process = self.processes.get(name)
        if process is None:
            return
        if group:
            self.signal(name, sig)
        else:
            self.signal_main(name, sig)
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            self.idle(0.05)
        if process.poll() is None:
            self.signal(name, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(20)
        self.seen_gone(name)

    def seen_gone(self, name: str) -> None:
        process = self.processes.get(name)
        if process is None or process.poll() is None:
            return
        if process.pid not in self.gone:
            self.gone.add(process.pid)
            self.note(name, process.pid, EXIT, f"returned {process.returncode}")

    def ensure_running(self) -> None:
        for name in self.kept:
            if name in self.held_down or name in self.resting or self.alive(name):
                continue
            self.seen_gone(name)
            self.spawn(name)

    def close(self) -> None:
        self.stop_all(30)
        for proxy in self.proxies.values():
            proxy.close()
        self.receivers.close()
        self.store.close()
        if self.other is not None:
            self.other.close()

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
                # long bodies stopped for a minute stay within Celery's time
                # limits (enforced by the worker's main process, on its clock)
                max_allowed_duration=timedelta(minutes=10),
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
        if self.other is not None:
            self.other.create(self.plan.other_recurring, self.plan.other_oneshots, self.at)

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

    # -- the schedule -------------------------------------------------------------

    def run(self, say: Callable[[str], None]) -> None:
        """Start everything, then inject the faults on schedule; the jobs'
        replacements happen at their offsets, whatever fault is beginning or
        ending then (:meth:`wait_until`)."""
        self.register_types()
        self.start = time.time()
        self.create_workload()
        self.ensure_running()
        self.replacements = sorted(
            ((j.replace_at, j) for j in self.plan.jobs if j.replace_at is not None),
            key=lambda pair: pair[0],
        )
        for n, fault in enumerate(self.plan.faults):
            self.wait_until(fault.at)
            began = time.time()
            state = soakfaults.begin(self, fault, n)
            if state is not None:  # it ends later, while the next faults go on
                # (it lasts as drawn from when it took hold: a stall waits
                # for its moment first)
                self.pending.append((time.time() + fault.seconds, fault, began, state))
                say(f"{fault.describe()} (begun{state.get('say', '')})")
            else:
                self.fault_log.append((fault, began, time.time()))
                say(f"{fault.describe()} (done in {time.time() - began:.1f} s)")
        while self.replacements:
            self.wait_until(self.replacements[0][0])
        self.wait_until(self.plan.scale.seconds)
        while self.pending:
            self.wait_until(min(at for at, *_ in self.pending) - self.start)
        self.ensure_running()

    def wait_until(self, offset: float) -> None:
        """Sleep until ``offset`` seconds after the start, replacing the
        jobs and ending the faults that last a while when their time comes
        (the schedule's own clock). A fault that begins or ends waits with
        :meth:`idle`, so that the rest still happens on time (an end may so
        run inside another's)."""
        target = self.start + offset
        while True:
            now = time.time()
            while (
                self.replacements
                and not self.database_down
                and self.start + self.replacements[0][0] <= now
            ):
                _, job = self.replacements.pop(0)
                self.put_job(job, job.replaced_by)
            for item in [p for p in self.pending if p[0] <= now]:
                if item not in self.pending:  # ended inside another one's wait
                    continue
                self.pending.remove(item)
                _, fault, began, state = item
                soakfaults.end(self, fault, state)
                self.fault_log.append((fault, began, time.time()))
            if now >= target:
                return
            replacing = [
                self.start + at for at, _ in self.replacements[:1] if not self.database_down
            ]
            wake = min([target, *replacing, *(at for at, *_ in self.pending)])
            time.sleep(max(0.0, wake - now))

    def idle(self, seconds: float) -> None:
        """Wait ``seconds``, ending the faults due meanwhile."""
        self.wait_until(time.time() - self.start + seconds)

    # -- what happened ----------------------------------------------------------------

    def notes(self, prefix: str | None = None) -> list[dict[str, Any]]:
        raw = self.counter.lrange(soakapp.bodies_key(prefix or self.prefix), 0, -1)
        return [json.loads(item) for item in raw]

    def read_bodies(self) -> None:
        """Bring :attr:`running` up to date with the notes written since."""
        key = soakapp.bodies_key(self.prefix)
        for raw in self.counter.lrange(key, self.read_upto, -1):
            self.read_upto += 1
            note = json.loads(raw)
            if note["kind"] == "start":
                self.running[note["exec"]] = note
            else:
                self.running.pop(note["exec"], None)

    def work_left(self, name: str) -> list[float]:
        """The seconds of work each probe body under way on worker ``name``
        has left now (from the notes: its start and its duration)."""
        if not self.alive(name):
            return []
        self.read_bodies()
        pid, now = self.pid(name), time.time()
        return [
            float(n["t"]) + float(n.get("duration") or 0) - now
            for n in self.running.values()
            if n["ppid"] == pid
        ]

    def busy(self, name: str, *, left: float = 1.0) -> bool:
        """Whether a probe body with at least ``left`` seconds of work to do
        runs on worker ``name`` now."""
        return any(each >= left for each in self.work_left(name))

    def ending(self, name: str, *, most: float, every: bool = True) -> int:
        """How many probe bodies on worker ``name`` are about to end (some
        work left, at most ``most`` seconds); 0 unless one is at least, and
        (``every``) each body under way on it is."""
        lefts = self.work_left(name)
        about = [each for each in lefts if 0.02 < each <= most]
        if not about or (every and len(about) < len(lefts)):
            return 0
        return len(about)

    def dump(self, runs: list[Any]) -> Path:
        """What happened, for a failing run's post-mortem: the faults, the
        journal, the bodies' notes and the runs recorded, as JSON lines in
        the logs folder."""
        path = self.logs / "history.jsonl"
        with path.open("w") as out:
            for fault, began, ended in self.fault_log:
                line = {"fault": fault.describe(), "began": began, "ended": ended}
                out.write(json.dumps(line) + "\n")
            for happening in self.journal:
                out.write(json.dumps({"happened": happening.to_json()}) + "\n")
            for body in self.notes():
                out.write(json.dumps({"body": body}) + "\n")
            for run in runs:
                out.write(json.dumps({"run": run}, default=str) + "\n")
            for delivery in (d for found in self.receivers.deliveries().values() for d in found):
                out.write(json.dumps({"delivery": delivery}) + "\n")
        return path

    def forget(self) -> None:
        self.receivers.forget()
        prefixes = [self.prefix] + ([self.other.prefix] if self.other else [])
        for prefix in prefixes:
            keys = list(self.counter.scan_iter(f"{prefix}:*"))
            if keys:
                self.counter.delete(*keys)
