"""One fault scenario's platform: a scheduler database, a broker, real
``swh scheduler`` daemons and ``celery worker`` processes, probe tasks.

The scenario creates ``count`` one-shot probe tasks, starts what it needs,
breaks something, and calls :meth:`Platform.outcome`, which waits (with a
bound) until every task has completed in the ground truth (the probe's
counters) and in the database, and returns a :class:`Row` of the table:
executions, runs recorded, tasks lost, tasks run twice, recovery seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.store import SQLAlchemyStore, tables

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import faultapp  # noqa: E402
from processes import ProcessTable  # noqa: E402

SWH = [str(Path(sys.executable).parent / "swh"), "scheduler"]
#: ``celery -A faultapp`` (worker and beat)
CELERY = [sys.executable, "-m", "celery", "-A", "faultapp"]


@dataclass(frozen=True)
class Row:
    """One line of the fault table."""

    scenario: str
    tasks: int
    executions: int
    recorded: int
    lost: int
    doubled: int
    recovery_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "recovery_seconds": round(self.recovery_seconds, 1)}


class Platform(ProcessTable):
    """The processes of one scenario, stopped (killed if need be) at the end."""

    def __init__(
        self,
        db_url: str,
        broker_url: str,
        counter_url: str,
        logs: Path,
        *,
        index_url: str | None = None,
        result_backend: str | None = None,
    ) -> None:
        self.db_url = db_url
        #: Celery's result backend (default: the counter's Redis, which no
        #: scenario breaks; the broker's, to break both at once)
        self.result_backend = result_backend or counter_url
        #: the Redis index every daemon is given (``SWH_SCHEDULER_INDEX_URL``)
        self.index_url = index_url
        self.broker_url = broker_url
        self.counter = redis.Redis.from_url(counter_url)
        self.counter_url = counter_url
        self.prefix = f"swh-fault-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.queue = f"{self.prefix}-probe"
        super().__init__(logs)
        self.store = SQLAlchemyStore.from_url(db_url)
        self._created = 0
        #: seconds between two renewals of a run by its body's process
        self.ping = 1.0
        #: the task types whose completed tasks :meth:`completed_in_db` counts
        self.probe_types: tuple[str, ...] = ("probe",)
        #: ``swh_scheduler_monitor`` of beat (:meth:`beat`): quick duties by default
        self.beat_monitor: dict[str, Any] = {
            "period": 1,
            "lock_ttl": 5,
            "orphaned_after": 3,
            "republish_after": 10,
        }

    # -- tasks --------------------------------------------------------------

    def create_tasks(self, count: int, *, duration: float = 0.0, spread: float = 0.0) -> None:
        """``count`` one-shot probe tasks, due now or over the next
        ``spread`` seconds."""
        self._probe_type()
        now = datetime.now(UTC)
        start = self._created
        tasks = []
        for n in range(start, start + count):
            at = now + timedelta(seconds=spread * (n - start) / max(1, count))
            tasks.append(
                Task(
                    type="probe",
                    args=(n,),
                    kwargs={"duration": duration} if duration else {},
                    schedule_kind=ScheduleKind.ONESHOT,
                    next_run=at,
                    deadline=at + timedelta(hours=1),
                    max_delay=timedelta(hours=1),
                )
            )
        self.store.create_tasks(tasks, now=now)
        self._created = start + count

    def create_periodic(self, count: int, *, period: str, cooldown: str | None = None) -> list[int]:
        """``count`` periodic probe tasks (staleness bound ``period``, the
        default cooldown unless ``cooldown``), due now, as ``task add
        --period [--cooldown]`` makes them; their ids."""
        task_type = self._probe_type("periodic-probe", retries=0)
        now = datetime.now(UTC)
        start = self._created
        tasks = [
            task_from_input(
                {"args": [n], "period": period, "cooldown": cooldown}, task_type, now=now
            )
            for n in range(start, start + count)
        ]
        self._created = start + count
        return [t.id or 0 for t in self.store.create_tasks(tasks, now=now)]

    def create_stall_tasks(self, count: int, *, steps: int, leased: bool = False) -> None:
        """``count`` one-shot stall probes (:data:`faultapp.STALL_TASK`, or
        the leased one) of ``steps`` steps of 0.05 s, due now."""
        name = "stall-leased" if leased else "stall"
        backend = faultapp.LEASED_STALL_TASK if leased else faultapp.STALL_TASK
        self._probe_type(name, backend=backend, retries=0)
        now = datetime.now(UTC)
        start = self._created
        tasks = [
            Task(
                type=name,
                args=(n,),
                kwargs={"steps": steps},
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=now,
                deadline=now + timedelta(hours=1),
            )
            for n in range(start, start + count)
        ]
        self.store.create_tasks(tasks, now=now)
        self._created = start + count
        self.probe_types = (name,)

    def _probe_type(
        self, name: str = "probe", *, retries: int = 3, backend: str = faultapp.PROBE_TASK
    ) -> TaskType:
        """The probe's task type ``name`` (created on first use)."""
        found = self.store.get_task_type(name)
        if found is None:
            self.store.create_task_type(
                TaskType(
                    type=name,
                    backend_name=backend,
                    queue=self.queue,
                    uses_lease=backend == faultapp.LEASED_STALL_TASK,
                    default_interval=timedelta(hours=1),
                    max_queue_length=20_000,
                    num_retries=retries,
                    retry_delay=timedelta(seconds=1),
                )
            )
            found = self.store.get_task_type(name)
        assert found is not None
        return found

    # -- processes ----------------------------------------------------------

    def environment(self) -> dict[str, str]:
        index = {"SWH_SCHEDULER_INDEX_URL": self.index_url} if self.index_url else {}
        return {
            **os.environ,
            **index,
            "SWH_SCHEDULER_DB_URL": self.db_url,
            "SWH_SCHEDULER_BROKER_URL": self.broker_url,
            "FAULT_BROKER": self.broker_url,
            "FAULT_COUNTER": self.counter_url,
            "FAULT_PREFIX": self.prefix,
            # the monitor's settings of ``celery beat -S swh`` (swh_scheduler_monitor)
            "FAULT_BEAT_MONITOR": json.dumps(self.beat_monitor),
            # how often the workers' bodies renew their runs (seconds)
            "FAULT_PING": str(self.ping),
            # results, for the listener's catch-up of runs whose events were
            # lost (Redis events are pub/sub), where no scenario breaks them
            "SWH_SCHEDULER_RESULT_BACKEND": self.result_backend,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH")])
            ),
        }

    def spawn(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        return self.launch(name, command)

    def runner(self, name: str = "runner", *extra: str) -> subprocess.Popen[bytes]:
        return self.spawn(
            name,
            [
                *SWH,
                "start-runner",
                "--period",
                "1",
                "--monitor-period",
                "1",
                "--lock-ttl",
                "5",
                "--orphaned-after",
                "3",
                "--republish-after",
                "10 s",
                *extra,
            ],
        )

    def listener(self, name: str = "listener") -> subprocess.Popen[bytes]:
        return self.spawn(
            name,
            [
                *SWH,
                "start-listener",
                "--queue-name",
                f"{self.prefix}-events",
                "--catch-up-every",
                "5",
                "--catch-up-delay",
                "5",
            ],
        )

    def beat(self, name: str = "beat", *, max_interval: int | None = 1) -> subprocess.Popen[bytes]:
        """``celery beat -S swh``; ``max_interval`` ``None``: beat's default."""
        schedule = self.logs / f"{name}-schedule"
        command = [*CELERY, "beat", "-S", "swh", "-s", str(schedule), "--loglevel", "INFO"]
        if max_interval is not None:
            command += ["--max-interval", str(max_interval)]
        return self.spawn(name, command)

    def worker(self, name: str = "worker", *, concurrency: int = 4) -> subprocess.Popen[bytes]:
        return self.spawn(
            name,
            [
                *CELERY,
                "worker",
                "-P",
                "prefork",
                "-c",
                str(concurrency),
                "-Q",
                self.queue,
                "-n",
                f"{name}-{self.prefix}@%h",
                "-E",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "WARNING",
            ],
        )

    def __enter__(self) -> Platform:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def kill(self, name: str) -> None:
        self.signal(name, signal.SIGKILL)
        self.processes[name].wait(20)

    def close(self) -> None:
        self.stop_all(20)
        keys = [
            faultapp.started_key(self.prefix),
            faultapp.completed_key(self.prefix),
            faultapp.refused_key(self.prefix),
            faultapp.notes_key(self.prefix),
            *(faultapp.fence_key(self.prefix, n) for n in range(self._created)),
        ]
        self.counter.delete(*keys)
        self.store.close()

    def notes(self) -> list[dict[str, Any]]:
        """The stall probes' notes, in the order they were written."""
        return [json.loads(n) for n in self.counter.lrange(faultapp.notes_key(self.prefix), 0, -1)]

    def refused(self) -> dict[int, int]:
        raw = self.counter.hgetall(faultapp.refused_key(self.prefix))
        return {int(k): int(v) for k, v in raw.items()}

    # -- ground truth -------------------------------------------------------

    def completions(self) -> dict[int, int]:
        raw = self.counter.hgetall(faultapp.completed_key(self.prefix))
        return {int(k): int(v) for k, v in raw.items()}

    def starts(self) -> int:
        raw = self.counter.hgetall(faultapp.started_key(self.prefix))
        return sum(int(v) for v in raw.values())

    def counts(self) -> tuple[dict[int, int], dict[int, int]]:
        """(bodies started, bodies ended) per task, read in one atomic step
        (two separate reads race with a body starting in between)."""
        with self.counter.pipeline(transaction=True) as pipe:
            pipe.hgetall(faultapp.started_key(self.prefix))
            pipe.hgetall(faultapp.completed_key(self.prefix))
            started, ended = pipe.execute()
        return (
            {int(k): int(v) for k, v in started.items()},
            {int(k): int(v) for k, v in ended.items()},
        )

    def completed_in_db(self) -> int:
        with self.store.engine.connect() as conn:
            return int(
                conn.scalar(
                    sa.select(sa.func.count()).where(
                        tables.task.c.type.in_(self.probe_types),
                        tables.task.c.status == TaskStatus.COMPLETED.value,
                    )
                )
                or 0
            )

    def runs_in_db(self) -> int:
        with self.store.engine.connect() as conn:
            return int(conn.scalar(sa.text("SELECT count(*) FROM task_run")) or 0)

    def wait_for(self, condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):  # a database being restarted
                if condition():
                    return
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; {self.status()}")

    def wait_done(self, count: int, timeout: float = 60) -> None:
        """Wait until ``count`` tasks completed (ground truth)."""
        self.wait_for(lambda: len(self.completions()) >= count, timeout, f"{count} tasks done")

    def status(self) -> str:
        done = self.completions()
        with contextlib.suppress(Exception):
            return (
                f"{len(done)} of {self._created} tasks completed (ground truth), "
                f"{self.completed_in_db()} in the database, {self.runs_in_db()} runs; "
                f"processes alive: {[n for n in self.processes if self.alive(n)]}"
            )
        return f"{len(done)} of {self._created} tasks completed (ground truth)"

    def outcome(self, scenario: str, *, since: float, timeout: float) -> Row:
        """Wait until every task completed and is recorded completed, then
        the table row; ``since``: the monotonic time the fault ended."""
        total = self._created
        self.wait_for(
            lambda: len(self.completions()) == total and self.completed_in_db() == total,
            timeout,
            "every task to complete, in the ground truth and in the database",
        )
        recovery = time.monotonic() - since
        done = self.completions()
        return Row(
            scenario=scenario,
            tasks=total,
            executions=sum(done.values()),
            recorded=self.completed_in_db(),
            lost=total - len(done),
            doubled=sum(1 for n in done.values() if n > 1),
            recovery_seconds=recovery,
        )
