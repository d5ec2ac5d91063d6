"""How many PostgreSQL connections a small platform holds, counted where
they are (``pg_stat_activity``, by ``application_name``), against the
formula of the documentation ("Connections and timeouts", ``docs/howto/connections.md``).

Real processes on a test database and Redis: a runner (with the monitor's
duties), a ``start-monitor``, a listener, the HTTP API under 40 concurrent
clients and a prefork worker of 2 processes running 400 tasks of the
``sleep`` type. Every 50 ms the connections of each daemon are counted; the
largest count of each must stay within the formula, and so must their sum.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
import pytest
import services
from waiting import wait_until

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_workers.sleep import TASK_NAME

ROOT = Path(__file__).parents[2]
SWH = [str(Path(sys.executable).parent / "swh"), "scheduler"]
TASKS = 400
TOKEN = "connections-test-token"
pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.postgresql,
    pytest.mark.redis,
    pytest.mark.timeout(300),
]


def formula(
    *, claimers: int = 2, lanes: int = 4, api_pool: int = 10, processes: int = 1, threads: int = 1
) -> dict[str, int]:
    """The documentation's "at most" of each daemon (one of each here; a worker of
    ``processes`` processes of ``threads`` threads that run bodies)."""
    return {
        # claims and the publisher's marks, 2 at a burst, the LISTEN connection
        "swh-scheduler-runner": claimers + 1 + 2 + 1,
        # the lanes and the catch-up, 1 at a burst
        "swh-scheduler-listener": lanes + 1 + 1,
        "swh-scheduler-monitor": 1 + 2,
        "swh-scheduler-api": api_pool,
        # per process: a held connection per thread, one pooled, 4 at a burst
        "swh-scheduler-worker": processes * (threads + 1 + 4),
        # one per process, while one of its statements waits on a lock
        "swh-scheduler-lockwatch": 4 + processes,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Census:
    """The largest number of connections seen per ``application_name``."""

    def __init__(self, url: str, database: str) -> None:
        self._conn = psycopg.connect(url, autocommit=True, application_name="test-census")
        self._database = database
        self.largest: Counter[str] = Counter()
        self.largest_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def count(self) -> Counter[str]:
        rows = self._conn.execute(
            "SELECT application_name, count(*) FROM pg_stat_activity"
            " WHERE datname = %s AND application_name <> 'test-census' GROUP BY 1",
            (self._database,),
        ).fetchall()
        return Counter({name: int(n) for name, n in rows})

    def sample(self) -> Counter[str]:
        now = self.count()
        for name, n in now.items():
            self.largest[name] = max(self.largest[name], n)
        self.largest_total = max(self.largest_total, sum(now.values()))
        return now

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            self.sample()

    def __enter__(self) -> Census:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._conn.close()


@pytest.fixture
def platform(postgres_url: str, tmp_path: Path) -> Iterator[tuple[SQLAlchemyStore, str, int]]:
    prefix = f"swh-conn-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    broker = services.redis_url()
    store = SQLAlchemyStore.from_url(postgres_url)
    queue = f"{prefix}-sleep"
    store.create_task_type(
        TaskType(type="sleep", backend_name=TASK_NAME, queue=queue, max_queue_length=50)
    )
    port = free_port()
    env = {
        **os.environ,
        "SWH_SCHEDULER_DB_URL": postgres_url,
        "SWH_SCHEDULER_BROKER_URL": broker,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    celery = [sys.executable, "-m", "celery", "-A", "swh_like_scheduler.celery_app"]
    commands = {
        "runner": [*SWH, "start-runner", "--period", "1", "--monitor-period", "1"],
        "monitor": [*SWH, "start-monitor", "--period", "1"],
        "listener": [*SWH, "start-listener", "--queue-name", f"{prefix}-ev"],
        "api": [*SWH, "rpc-serve", "--port", str(port), "--tokens", f"{TOKEN}:rw"],
        "worker": [
            *celery,
            "worker",
            "-P",
            "prefork",
            "-c",
            "2",
            "-O",
            "fair",
            "-Q",
            queue,
            "-n",
            f"{prefix}@%h",
            "-E",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "WARNING",
        ],
    }
    processes = []
    for name, command in commands.items():
        log = (tmp_path / f"{name}.log").open("ab")
        processes.append(
            subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        )
    try:
        yield store, queue, port
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        store.close()
        for log in tmp_path.glob("*.log"):
            print(f"== {log.name}\n{log.read_text(errors='replace')[-2000:]}")


def test_each_daemon_holds_what_the_formula_says(
    platform: tuple[SQLAlchemyStore, str, int], postgres_url: str
) -> None:
    store, _queue, port = platform
    url = services.libpq_url(postgres_url)
    database = store.engine.url.database or ""
    api = httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"}
    )

    def api_up() -> bool:
        try:
            return api.get("/task-types").status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(api_up, 60, "the API")
    with Census(url, database) as census:
        now = datetime.now(UTC)
        store.create_tasks(
            [
                Task(
                    type="sleep",
                    kwargs={"duration": 0.05, "seed": n},
                    schedule_kind=ScheduleKind.ONESHOT,
                    next_run=now,
                    deadline=now + timedelta(minutes=5),
                )
                for n in range(TASKS)
            ],
            now=now,
        )

        def hammer(_: int) -> None:
            client = httpx.Client(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=60,
            )
            for _ in range(10):
                client.get("/tasks", params={"type": "sleep", "limit": 100})
            client.close()

        with ThreadPoolExecutor(40) as pool:
            list(pool.map(hammer, range(40)))

        def all_done() -> bool:
            return store.count_tasks() == len(store.search_tasks(limit=TASKS * 2)) and all(
                t.status is TaskStatus.COMPLETED for t in store.search_tasks(limit=TASKS)
            )

        wait_until(all_done, 180, f"{TASKS} tasks completed")
        settled = census.sample()
    largest = {n: c for n, c in census.largest.items() if n.startswith("swh-scheduler-")}
    most = formula(processes=2)
    print("largest seen:", largest, "in all", census.largest_total)
    print("kept after the run:", dict(settled))
    print("formula (at most):", most, "in all", sum(most.values()))
    # every daemon is named apart, and only they connected
    daemons = {f"swh-scheduler-{d}" for d in ("runner", "listener", "monitor", "api", "worker")}
    assert daemons <= set(largest) <= set(most), largest
    for name, seen in largest.items():
        assert seen <= most[name], (name, seen, most[name])
    assert sum(largest.values()) <= sum(most.values())
