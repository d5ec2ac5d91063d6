"""The HTTP API's actions say why they changed nothing, and its explain
says which state the task's run is in (the same words as the command line)."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
from api_server import Clock

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)


def test_respawn_and_enable_of_a_running_task_say_why_not(
    client: httpx.Client, store: SQLAlchemyStore, clock: Clock, now: datetime
) -> None:
    store.create_task_type(TaskType(type="probe", backend_name="probe.run", default_interval=H))
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
    [claimed] = store.claim_ready_tasks("probe", now=now, limit=1)
    store.start_task_run(claimed.backend_id, started=now, worker="probe@box")
    clock.now = now + timedelta(minutes=2)
    for action in ("respawn", "enable"):
        answer = client.post(f"/tasks/{task.id}/{action}")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["changed"] is False and body["task"]["status"] == "scheduled"
        assert "started at" in body["reason"] and "by worker probe@box" in body["reason"]
    assert client.post(f"/tasks/{task.id}/disable").json()["reason"] is None  # it changed
    explained = client.get(f"/tasks/{task.id}/explain").json()
    assert explained["run"]["phase"] == "running"
    assert explained["run"]["backend_id"] == claimed.backend_id
