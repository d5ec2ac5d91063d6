"""``PATCH /tasks/{id}``, ``/tasks/by-key/{key}`` and ``/task-types/{name}``
over a real server, against SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime

import httpx

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore


def test_patch_a_task_and_a_task_type(
    client: httpx.Client, reader: httpx.Client, sleep_type: TaskType, now: datetime
) -> None:
    body = {"tasks": [{"type": "sleep", "args": [1], "period": "1h", "key": "nap"}]}
    [created] = client.post("/tasks", json=body).json()["tasks"]
    path = f"/tasks/{created['id']}"
    assert reader.patch(path, json={"period": "2h"}).status_code == 403
    edited = client.patch(path, json={"period": 7200, "priority": "high", "cooldown": "10m"})
    assert edited.status_code == 200, edited.text
    data = edited.json()
    assert (data["period"], data["priority"], data["cooldown"]) == (7200.0, "high", 600.0)
    assert data["deadline"] == "2026-03-01T14:00:00+00:00"  # created now: the anchor + 2 h
    by_key = client.patch("/tasks/by-key/nap", json={"cooldown": None, "args": [2]})
    assert by_key.status_code == 200 and by_key.json()["cooldown"] is None
    assert client.get(path).json()["args"] == [2]
    typed = client.patch("/task-types/sleep", json={"max_queue_length": None, "num_retries": 1})
    assert typed.status_code == 200, typed.text
    assert typed.json()["max_queue_length"] is None and typed.json()["num_retries"] == 1
    assert reader.patch("/task-types/sleep", json={"num_retries": 2}).status_code == 403


def test_patch_refusals(
    client: httpx.Client, store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    body = {"tasks": [{"type": "sleep", "args": [1], "period": "1h"}]}
    [created] = client.post("/tasks", json=body).json()["tasks"]
    path = f"/tasks/{created['id']}"
    for change, loc in (
        ({"nope": 1}, ["body", "nope"]),
        ({"cooldown": "2h"}, ["body", "cooldown"]),
        ({"period": "soon"}, ["body", "period"]),
        ({}, ["body", "body"]),
    ):
        refused = client.patch(path, json=change)
        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"][0]["loc"] == loc
    assert client.patch("/tasks/999999", json={"period": "1h"}).status_code == 404
    assert client.patch("/tasks/by-key/none-such", json={"period": "1h"}).status_code == 404
    assert client.patch("/task-types/nope", json={"num_retries": 1}).status_code == 404
    bad_type = client.patch("/task-types/sleep", json={"retry_delay": None})
    assert bad_type.status_code == 422
    assert bad_type.json()["detail"][0]["loc"] == ["body", "retry_delay"]
    store.claim_ready_tasks("sleep", now=now, limit=1)
    busy = client.patch(path, json={"args": [3]})
    assert busy.status_code == 409 and "args" in busy.json()["detail"]
    moved = client.patch("/task-types/sleep", json={"queue": "elsewhere"})
    assert moved.status_code == 409 and "queue" in moved.json()["detail"]
    assert client.get(path).json()["args"] == [1]


def test_patch_of_a_type_that_would_break_its_tasks_is_a_422_naming_the_setting(
    client: httpx.Client, sleep_type: TaskType
) -> None:
    body = {"tasks": [{"type": "sleep", "args": [1], "period": "5m"}]}
    [created] = client.post("/tasks", json=body).json()["tasks"]
    refused = client.patch("/task-types/sleep", json={"num_retries": 2})
    assert refused.status_code == 422, refused.text
    [detail] = refused.json()["detail"]
    assert detail["loc"] == ["body", "num_retries"]
    assert f"task {created['id']}" in detail["msg"] and "period" in detail["msg"]
    assert client.get("/task-types/sleep").json()["num_retries"] is None
