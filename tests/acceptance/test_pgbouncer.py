"""The platform behind a real PgBouncer in transaction mode (issue 58).

Every daemon's database URL goes through a private PgBouncer
(tests/pooler.py) that lends 3 server connections to all of them, with
``?pooler=transaction``: ``swh scheduler start-runner`` (with the monitor's
duties), or ``celery beat -S swh`` in its place, ``start-listener``,
``rpc-serve`` and a real ``celery worker`` of a leased task type
(:mod:`pooledapp`: its start guard, pings and final write go through the
pooler too). 30 one-shot tasks and 6 periodic ones of a
3 s period run for a while: each statement runs far more than the 5 times
after which psycopg would prepare it. Every run must have run its body once
(the body's own marker file) and ended, nothing stays ``started``, and no
log speaks of prepared statements or startup parameters.

Without the pooler mode, the runner and the listener stop at start on an
error that names the pooler's refusal, not an unreachable database.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import services
from pooler import PrivatePgBouncer, pgbouncer
from waiting import delete_queues, wait_until

from swh_like_scheduler.domain.model import (
    RunStatus,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.postgresql,
    pytest.mark.redis,
    pytest.mark.timeout(300),
]

HERE = Path(__file__).parent
SWH = [str(Path(sys.executable).with_name("swh")), "scheduler"]
ONESHOTS = 30
PERIODIC = 6
PERIOD = timedelta(seconds=3)
TOKEN = "pgbouncer-test-token"
#: the task of :mod:`pooledapp`
TASK = "tests.pooled.work"
#: what no log may say: the pooler mixing up sessions, or refusing one
FORBIDDEN = ("prepared statement", "startup parameter", "cannot reach the database")


def database_of(url: str) -> str:
    return urllib.parse.unquote(urllib.parse.urlsplit(url).path.lstrip("/"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Daemons:
    """Named subprocesses logging to files of ``logs``."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.env = logs, env
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.stopped: set[str] = set()

    def start(self, name: str, *command: str) -> None:
        with (self.logs / f"{name}.log").open("ab") as log:
            self.running[name] = subprocess.Popen(
                command,
                cwd=self.logs,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def check_alive(self) -> None:
        for name, process in self.running.items():
            assert name in self.stopped or process.poll() is None, (
                f"{name} exited:\n{self.log(name)[-3000:]}"
            )

    def stop(self, name: str) -> None:
        self.stopped.add(name)
        process = self.running[name]
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name)


@pytest.fixture
def bouncer(postgres_url: str) -> Iterator[PrivatePgBouncer]:
    database = database_of(postgres_url)
    with pgbouncer(postgres_url, [database], pool_size=3) as running:
        yield running


@pytest.fixture
def queue() -> Iterator[str]:
    broker = services.require("redis", services.redis_url)
    name = f"swh-test-pooled-{uuid.uuid4().hex[:8]}"
    yield name
    app = make_app(config_module=None, broker_url=broker, load_workers=False)
    delete_queues(app, name, f"{name}-ev")


def environment(url: str, out: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "SWH_SCHEDULER_DB_URL": url,
        "SWH_SCHEDULER_BROKER_URL": services.redis_url(),
        "POOLED_BROKER": services.redis_url(),
        "POOLED_OUT": str(out),
    }


def executions(out: Path) -> list[tuple[str, str]]:
    """``(run id, task number)`` of each execution of a body so far."""
    return [
        (path.name.partition("~")[0], path.read_text().strip())
        for path in out.iterdir()
        if not path.name.startswith(".")
    ]


def make_tasks(store: SQLAlchemyStore, queue: str) -> None:
    store.create_task_type(
        TaskType(
            type="pooled",
            backend_name=TASK,
            queue=queue,
            uses_lease=True,
            max_queue_length=100,
            default_interval=timedelta(hours=1),
        )
    )
    now = datetime.now(UTC)
    oneshots = [
        Task(
            type="pooled",
            args=(n,),
            kwargs={"duration": 0.1 + (n % 4) * 0.4},
            schedule_kind=ScheduleKind.ONESHOT,
            next_run=now,
            deadline=now + timedelta(seconds=n),
        )
        for n in range(ONESHOTS)
    ]
    periodic = [
        Task(
            type="pooled",
            args=(ONESHOTS + n,),
            kwargs={"duration": 0.2},
            schedule_kind=ScheduleKind.PERIODIC,
            period=PERIOD,
            next_run=now,
            deadline=now + PERIOD,
        )
        for n in range(PERIODIC)
    ]
    store.create_tasks([*oneshots, *periodic], now=now)


#: the two dispatchers: the runner (with the monitor's duties), or Celery beat
DISPATCHERS = {
    "runner": (*SWH, "start-runner", "--period", "1", "--monitor-period", "1"),
    "beat": (sys.executable, "-m", "celery", "-A", "pooledapp", "beat", "-S", "swh",
             "-l", "INFO", "--max-interval", "1"),
}  # fmt: skip


@pytest.mark.parametrize("dispatcher", sorted(DISPATCHERS))
def test_the_platform_runs_every_task_once_behind_pgbouncer_in_transaction_mode(
    bouncer: PrivatePgBouncer, postgres_url: str, queue: str, tmp_path: Path, dispatcher: str
) -> None:
    database = database_of(postgres_url)
    url = bouncer.url(database, pooler="transaction")
    out = tmp_path / "bodies"
    out.mkdir()
    store = SQLAlchemyStore.from_url(url)
    make_tasks(store, queue)
    port = free_port()
    daemons = Daemons(tmp_path, environment(url, out))
    try:
        daemons.start(dispatcher, *DISPATCHERS[dispatcher])
        daemons.start("listener", *SWH, "start-listener", "--queue-name", f"{queue}-ev")
        daemons.start("api", *SWH, "rpc-serve", "--port", str(port), "--tokens", f"{TOKEN}:rw")
        daemons.start(
            "worker",
            sys.executable,
            "-m",
            "celery",
            "-A",
            "pooledapp",
            "worker",
            "-P",
            "threads",
            "-c",
            "4",
            "-E",
            "-Q",
            queue,
            "-n",
            f"pooled-{uuid.uuid4().hex[:6]}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "WARNING",
        )
        api = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )

        def oneshots_done() -> bool:
            daemons.check_alive()
            tasks = store.search_tasks(limit=ONESHOTS + PERIODIC)
            return all(
                t.status is TaskStatus.COMPLETED
                for t in tasks
                if t.schedule_kind is ScheduleKind.ONESHOT
            )

        wait_until(oneshots_done, 120, f"{ONESHOTS} one-shot tasks completed")

        def periodic_ran_thrice() -> bool:
            daemons.check_alive()
            bodies = Counter(int(number) for _, number in executions(out))
            return all(bodies[ONESHOTS + n] >= 3 for n in range(PERIODIC))

        wait_until(periodic_ran_thrice, 60, "each periodic task run three times")
        for _ in range(10):  # the API's reads through the pooler too
            assert api.get("/tasks", params={"type": "pooled", "limit": 100}).status_code == 200
        assert api.get("/health").status_code in (200, 503)
        daemons.stop(dispatcher)  # nothing new is dispatched; what was, ends

        def settled() -> bool:
            daemons.check_alive()
            return all(
                t.status is not TaskStatus.SCHEDULED
                for t in store.search_tasks(limit=ONESHOTS + PERIODIC)
            )

        wait_until(settled, 60, "every run dispatched ended and recorded")
    finally:
        daemons.stop_all()
    # what ran: one marker per execution of a body, named by its run
    done = executions(out)
    per_run = Counter(run_id for run_id, _ in done)
    assert all(n == 1 for n in per_run.values()), "a run's body ran twice"
    markers = dict(done)
    runs = [
        run
        for task in store.search_tasks(limit=ONESHOTS + PERIODIC)
        for run in store.get_task_runs(task.id or 0, limit=1000)
    ]
    store.close()
    statuses = Counter(run.status for run in runs)
    assert statuses[RunStatus.STARTED] == 0 and statuses[RunStatus.SCHEDULED] == 0, statuses
    assert set(statuses) == {RunStatus.EVENTFUL}, statuses
    # every run recorded ran its body once, and every body ran for a run
    assert {run.backend_id for run in runs} == set(markers)
    bodies = Counter(int(number) for number in markers.values())
    assert all(bodies[n] == 1 for n in range(ONESHOTS)), bodies
    assert all(bodies[ONESHOTS + n] >= 3 for n in range(PERIODIC)), bodies
    logs = {name: daemons.log(name) for name in daemons.running}
    logs["pgbouncer"] = bouncer.log_text()
    for name, text in logs.items():
        for words in FORBIDDEN:
            assert words not in text.lower(), f"{name} says {words!r}:\n{text[-3000:]}"
    assert "behind a pooler (pooler=transaction)" in logs[dispatcher]


@pytest.mark.parametrize("daemon", ["start-runner", "start-listener"])
def test_without_the_pooler_mode_a_daemon_names_the_poolers_refusal(
    bouncer: PrivatePgBouncer, postgres_url: str, daemon: str, tmp_path: Path
) -> None:
    database = database_of(postgres_url)
    env = environment(bouncer.url(database), tmp_path)
    done = subprocess.run(
        [*SWH, daemon], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "a connection pooler (PgBouncer) refused the connection" in said, said
    assert "?pooler=transaction" in said
    assert "cannot reach the database" not in said
