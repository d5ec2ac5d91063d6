"""A runner stopped (SIGSTOP) in the middle of its claim: the server ends
its transaction (``idle_in_transaction_session_timeout``, 30 s by default)
and another runner dispatches the tasks it held within a minute of the
stall, each once. Before, the claim's transaction, and every task it had
locked, stayed held for as long as the runner was stopped.

The quick cut gives both runners a bound of 10 s (``PGOPTIONS``, which
their sessions keep: tests/unit/store/test_session_bounds.py) and asks for
the dispatch within 40 s; ``SWH_SLOW=full`` runs them on the default (each
session's 30 s is checked in tests/integration/store/test_pg_sessions.py).

Two ``swh scheduler start-runner`` processes on a test database and Redis.
The stall is placed by a lock, not by timing: a trigger of this test's
database makes the claim of the runner named ``runner-a`` (its URL's
``application_name``) wait, once it holds its tasks, for an advisory lock
the test holds; the runner is stopped while it waits, then the lock is
given back, so the claim's statement completes on the server with the
runner stopped before its commit: its session is idle in a transaction
that holds every claimed task.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
import redis
import services
from cuts import scale
from runnertest import make_test_app, new_type, ready_tasks
from waiting import delete_queues as purge
from waiting import wait_until

from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]

SWH = [str(Path(sys.executable).parent / "swh"), "scheduler"]
TASKS = 300
GATE = 4242
#: the runners' ``idle_in_transaction_session_timeout`` (s): their default
#: in the full cut, a shorter one set by ``PGOPTIONS`` in the quick one
DEFAULT_IDLE = 30
IDLE = scale(10, DEFAULT_IDLE)
#: what the issue asks: the stalled runner's tasks free again within a minute
#: (the bound, then 30 s)
WITHIN = IDLE + 30.0
#: the runners' environment beyond ours
IDLE_ENV = (
    {} if IDLE == DEFAULT_IDLE else {"PGOPTIONS": f"-c idle_in_transaction_session_timeout={IDLE}s"}
)

GATE_SQL = f"""
CREATE FUNCTION test_claim_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') = 'runner-a' THEN
        PERFORM pg_advisory_xact_lock_shared({GATE});
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_claim_gate BEFORE INSERT ON task_run
    FOR EACH ROW EXECUTE FUNCTION test_claim_gate();
"""


class Runners:
    """``start-runner`` processes, each in its own session, logs in ``logs``."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, db_url: str, broker_url: str, task_type: str) -> None:
        command = [
            *SWH,
            "--db-url",
            db_url,
            "start-runner",
            "--period",
            "1",
            "--no-monitor",
            "--broker-url",
            broker_url,
            "--type",
            task_type,
        ]
        with (self.logs / f"{name}.log").open("ab") as log:
            self.processes[name] = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **IDLE_ENV},
            )

    def signal(self, name: str, sig: int) -> None:
        process = self.processes[name]
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for name in self.processes:
            self.signal(name, signal.SIGCONT)
            self.signal(name, signal.SIGTERM)
        for name, process in self.processes.items():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                self.signal(name, signal.SIGKILL)
                process.wait(10)


@pytest.fixture
def runners(tmp_path: Path) -> Iterator[Runners]:
    table = Runners(tmp_path)
    try:
        yield table
    finally:
        table.stop_all()


def message_ids(client: redis.Redis, queue: str) -> list[str]:
    """The Celery task ids of the messages waiting in ``queue`` (Redis)."""
    return [json.loads(raw)["headers"]["id"] for raw in client.lrange(queue, 0, -1)]


def test_a_stalled_runners_tasks_are_dispatched_by_another_within_a_minute(
    pg_store: SQLAlchemyStore, postgres_url: str, runners: Runners
) -> None:
    broker_url = services.redis_url()
    app = make_test_app(broker_url)
    client = redis.Redis.from_url(broker_url)
    now = datetime.now(tz=UTC)
    task_type = new_type(pg_store, None)
    queue = task_type.effective_queue
    pg_store.import_tasks(ready_tasks(task_type, TASKS, now), now=now)
    libpq = services.libpq_url(postgres_url)
    try:
        with psycopg.connect(libpq, autocommit=True, application_name="test-admin") as admin:
            admin.execute(GATE_SQL)
            admin.execute("SELECT pg_advisory_lock(%s)", (GATE,))
            # (the URL's application_name wins over the runner's own name)
            runners.start(
                "a", f"{postgres_url}?application_name=runner-a", broker_url, task_type.type
            )

            def claim_waits() -> bool:
                row = admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'runner-a'"
                    " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
                ).fetchone()
                return bool(row and row[0])

            wait_until(claim_waits, 60, f"runner a's claim at the gate: {runners.log('a')}")
            runners.signal("a", signal.SIGSTOP)
            stalled = time.monotonic()
            admin.execute("SELECT pg_advisory_unlock(%s)", (GATE,))

            def holds_every_task() -> bool:
                row = admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'runner-a'"
                    " AND state = 'idle in transaction'"
                ).fetchone()
                locked = admin.execute(
                    "SELECT count(*) FROM (SELECT id FROM task WHERE type = %s"
                    " FOR UPDATE SKIP LOCKED) AS free",
                    (task_type.type,),
                ).fetchone()
                return bool(row and row[0]) and locked is not None and locked[0] == 0

            wait_until(holds_every_task, 15, "runner a stopped, its claim holding every task")
            runners.start("b", postgres_url, broker_url, task_type.type)
            wait_until(
                lambda: client.llen(queue) >= TASKS,
                WITHIN - (time.monotonic() - stalled),
                f"runner b to dispatch the {TASKS} tasks within {WITHIN:.0f} s of the stall",
            )
            took = time.monotonic() - stalled
            # runner a wakes up: its claim is gone with its session, so the
            # pass that made it ends publishing nothing of it
            runners.signal("a", signal.SIGCONT)
            wait_until(
                lambda: "claim failed" in runners.log("a"),
                30,
                f"runner a to find its claim ended: {runners.log('a')}",
            )
        ids = message_ids(client, queue)
        assert len(ids) == len(set(ids)) == TASKS, (len(ids), len(set(ids)))
        with pg_store.engine.connect() as conn:
            runs, tasks = conn.exec_driver_sql(
                "SELECT count(*), count(DISTINCT task_id) FROM task_run"
            ).one()
        assert runs == tasks == TASKS
        print(
            f"stalled runner's {TASKS} tasks dispatched by the other {took:.1f} s after the stall"
        )
    finally:
        purge(app, queue)
