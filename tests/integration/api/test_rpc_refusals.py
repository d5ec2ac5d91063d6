"""What ``/rpc`` refuses before calling the store (issue 44): nesting deeper
than any call needs, before anything recurses over it (700 levels deep from
a read-only token was a plain-text 500 and thousands of log lines), and
arguments not of the method's annotations (a text where ids go was a 503,
"the database failed")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
import pytest
from api_server import remote

from swh_like_scheduler.api.routes_rpc import MAX_RPC_DEPTH
from swh_like_scheduler.exceptions import InvalidInput
from swh_like_scheduler.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [MAX_RPC_DEPTH + 1, 700])
def test_a_read_nested_too_deep_is_a_422_naming_the_part(reader: httpx.Client, depth: int) -> None:
    for part, body in (
        ("kwargs", {"kwargs": {"ids": nested(depth)}}),
        ("args", {"args": [nested(depth)]}),
    ):
        answer = reader.post("/rpc/get_tasks", json=body)
        assert answer.status_code == 422, answer.text
        [detail] = answer.json()["detail"]
        assert detail["loc"] == ["body", part]
        assert f"more than {MAX_RPC_DEPTH} levels deep" in detail["msg"]


def test_a_body_too_deep_for_the_json_parser_is_a_400(reader: httpx.Client) -> None:
    raw = '{"kwargs": {"ids": ' + "[" * 100_000 + "1" + "]" * 100_000 + "}}"
    answer = reader.post(
        "/rpc/get_tasks", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400, answer.text


def test_task_arguments_as_deep_as_allowed_still_cross_the_wire(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    from swh_like_scheduler.model import MAX_JSON_DEPTH

    def task(depth: int) -> Task:
        return Task(
            type="sleep",
            next_run=now,
            deadline=now,
            schedule_kind=ScheduleKind.ONESHOT,
            kwargs={"doc": nested(depth - 2)},  # the kwargs mapping and its list
        )

    with remote(store) as client:
        [created] = client.create_tasks([task(MAX_JSON_DEPTH)], now=now)
        assert created.kwargs == {"doc": nested(MAX_JSON_DEPTH - 2)}
        with pytest.raises(InvalidInput) as refused:
            client.create_tasks([task(MAX_JSON_DEPTH + 2)], now=now)
        assert refused.value.field == "kwargs"  # the store's rule, not the door's


@pytest.mark.parametrize(
    ("method", "body", "field", "expected"),
    [
        ("get_tasks", {"kwargs": {"ids": [1, "x"]}}, "ids[1]", "must be int"),
        ("search_tasks", {"kwargs": {"after_id": "x"}}, "after_id", "must be int"),
        ("search_tasks", {"kwargs": {"after_id": True}}, "after_id", "must be int"),
        ("get_task_type", {"args": [5]}, "name", "must be str"),
        ("get_task_runs", {"args": ["x"]}, "task_id", "must be int"),
        ("count_tasks", {"kwargs": {"criteria": 5}}, "criteria", "must be TaskFilter"),
        ("get_task_by_key", {"args": [{"a": 1}]}, "key", "must be str"),
    ],
)
def test_an_argument_of_the_wrong_type_is_a_422_naming_it(
    reader: httpx.Client, method: str, body: dict[str, Any], field: str, expected: str
) -> None:
    answer = reader.post(f"/rpc/{method}", json=body)
    assert answer.status_code == 422, answer.text
    [detail] = answer.json()["detail"]
    assert detail["loc"] == ["body", field]
    assert detail["msg"].startswith(expected)
    assert reader.post("/rpc/get_tasks", json={"kwargs": {"ids": [1, 2]}}).json() == {"result": []}
