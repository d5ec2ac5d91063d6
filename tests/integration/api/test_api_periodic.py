"""``POST /tasks``: a periodic task without a cooldown gets the default one;
an explicit 0 is kept; a zero interval or period is a 422 naming the field."""

from __future__ import annotations

import httpx
from test_api import only_error

from swh_like_scheduler.domain.model import TaskType


def test_periodic_defaults_over_http(client: httpx.Client, sleep_type: TaskType) -> None:
    created = client.post(
        "/tasks",
        json={
            "tasks": [
                {"type": "sleep", "args": [1], "period": "1h"},
                {"type": "sleep", "args": [2], "period": 3600, "cooldown": 0},
                {"type": "sleep", "args": [3], "period": "1h", "expected_duration": "5 min"},
            ]
        },
    )
    assert created.status_code == 201, created.text
    assert [t["cooldown"] for t in created.json()["tasks"]] == [3240, 0, 2640]
    ids = [t["id"] for t in created.json()["tasks"]]
    assert [client.get(f"/tasks/{i}").json()["cooldown"] for i in ids] == [3240, 0, 2640]


def test_zero_durations_are_refused_naming_the_field(
    client: httpx.Client, sleep_type: TaskType
) -> None:
    for field, value in (("interval", 0), ("period", "0s"), ("cron_max_duration", "0")):
        task = {"type": "sleep", field: value}
        if field == "cron_max_duration":
            task["cron"] = "0 3 * * *"
        loc, msg = only_error(client.post("/tasks", json={"tasks": [task]}))
        assert loc == ["body", "tasks", 0, field], msg
        assert "zero" in msg
    assert client.get("/tasks").json()["tasks"] == []
