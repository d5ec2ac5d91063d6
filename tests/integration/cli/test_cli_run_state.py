"""``task explain`` says which state a task's run is in, from the run row
(not the task's owner fields), and ``task respawn`` / ``task enable`` say
why they changed nothing. The issue's case: a run started (its start came
from the listener's event), its end never arrived; explain said "has not
reported its start yet" and respawn / enable said "unchanged" alone."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.monitor import WorkerSighting
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
WORKER = "probe@box-1"


@pytest.fixture
def opened(db_url: str) -> Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore.from_url(db_url)
    yield store
    store.close()


def invoke(db_url: str, *args: str) -> Result:
    return CliRunner().invoke(swh, ["scheduler", "--db-url", db_url, *args])


def dispatched(store: SQLAlchemyStore) -> tuple[int, int, str]:
    """A task whose run was claimed (dispatched): task id, run id, backend id."""
    store.create_task_type(
        TaskType(
            type="probe",
            backend_name="probe.run",
            queue="probe-q",
            default_interval=H,
            min_interval=timedelta(minutes=10),
            max_interval=timedelta(days=1),
            backoff_factor=2.0,
        )
    )
    now = datetime.now(UTC)
    [task] = store.create_tasks(
        [
            Task(
                type="probe",
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=now - H,
                deadline=now,
            )
        ],
        now=now - H,
    )
    # dispatched 5 minutes ago (the run below starts 3 minutes ago: never
    # before its dispatch)
    [claimed] = store.claim_ready_tasks("probe", now=now - timedelta(minutes=5), limit=1)
    [run] = store.get_task_runs(task.id or 0)
    return task.id or 0, run.id or 0, claimed.backend_id


def test_explain_respawn_and_enable_say_where_the_run_is(
    db_url: str, opened: SQLAlchemyStore
) -> None:
    task_id, run_id, backend_id = dispatched(opened)
    said = invoke(db_url, "task", "explain", str(task_id))
    assert said.exit_code == 0, said.output
    assert f"run {run_id} (celery id {backend_id[:8]}\u2026) was dispatched at" in said.output
    assert "has not started yet: its message waits in queue probe-q for a worker" in said.output
    respawn = invoke(db_url, "task", "respawn", str(task_id))
    assert respawn.exit_code == 0
    assert f"Task {task_id}: unchanged: the task has an open run: run {run_id} was dispatched" in (
        respawn.stderr
    )
    assert f"cancel it first (`swh scheduler task cancel {task_id}`)" in respawn.stderr

    # the listener records the run's start (task-started): the task's owner
    # fields stay empty, as in the issue
    started = datetime.now(UTC) - timedelta(minutes=3)
    assert opened.start_task_run(backend_id, started=started, worker=WORKER) is not None
    opened.record_worker_sightings([WorkerSighting(WORKER, datetime.now(UTC), True, 2.0, 4242)])
    said = invoke(db_url, "task", "explain", str(task_id))
    assert "reported its start" not in said.output
    start_text = started.replace(microsecond=0).isoformat(sep=" ")
    # 3 minutes ago, and the seconds the command took to answer (on a loaded
    # machine "3m02s ago"); the run by its number, its Celery id beside it
    named = rf"run {run_id} \(celery id {backend_id[:8]}\u2026\)"
    pattern = rf"{named} started at {re.escape(start_text)} \(3m(0\ds)? ago\) by worker "
    assert re.search(pattern + re.escape(WORKER), said.output), said.output
    assert "its worker was last heard from at" in said.output
    data = json.loads(invoke(db_url, "task", "explain", str(task_id), "--json").output)
    assert data["run"]["phase"] == "running" and data["run"]["worker"] == WORKER
    assert data["ready"] is False
    enable = invoke(db_url, "task", "enable", str(task_id))
    assert enable.exit_code == 0
    assert (
        f"Task {task_id}: unchanged: the task is not disabled, it is dispatched: run {run_id} "
        f"started at {start_text}"
    ) in enable.stderr
    respawn = invoke(db_url, "task", "respawn", str(task_id), "--json")
    assert json.loads(respawn.stdout) == []  # the JSON lists what changed; stderr says why not
    assert f"run {run_id} started at {start_text}" in respawn.stderr

    # the run ends, but its end never reaches the task (no outcome applied)
    opened.end_task_run(backend_id, status=RunStatus.EVENTFUL, ended=datetime.now(UTC))
    said = invoke(db_url, "task", "explain", str(task_id))
    assert f"run {run_id} (celery id {backend_id[:8]}\u2026) ended eventful at" in said.output
    assert "its end was not applied to the task; cancel it, then respawn it" in said.output
    assert invoke(db_url, "task", "cancel", str(task_id)).exit_code == 0
    respawned = invoke(db_url, "task", "respawn", str(task_id))
    assert f"Task {task_id}: respawned (status waiting)" in respawned.output
