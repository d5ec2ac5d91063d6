"""A caller's mistake is a 422 naming what is wrong, the same on SQLite and
on PostgreSQL, never a 503 (issue 60): on 413f804 ``after_id`` -10**30 was
a 503 "the database failed (bigint out of range)" on PostgreSQL and a 500
on SQLite; ``get_task_runs`` with ``limit`` -1 a 503 on PostgreSQL and every
run of the task on SQLite; NaN or 1e999 in an origin's
``extra_loader_arguments`` a 503 "the database failed". A monitoring
system counting 503s as outages could be fed false alarms by any token."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import httpx
import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore, wire
from swh_like_scheduler.visits.model import ListedOrigin


def _task_with_a_run(store: SQLAlchemyStore, now: datetime) -> int:
    [task] = store.create_tasks(
        [Task(type="sleep", next_run=now, deadline=now, schedule_kind=ScheduleKind.ONESHOT)],
        now=now,
    )
    assert task.id is not None
    store.schedule_task_run(task.id, now=now)
    return task.id


@pytest.mark.parametrize("after_id", [-(10**30), 10**30, 2**63, -(2**63) - 1])
def test_an_id_past_64_bits_is_a_422_naming_it(reader: httpx.Client, after_id: int) -> None:
    answer = reader.post("/rpc/search_tasks", json={"kwargs": {"after_id": after_id}})
    assert answer.status_code == 422, answer.text
    [detail] = answer.json()["detail"]
    assert detail["loc"] == ["body", "after_id"]
    assert "64 bits" in detail["msg"]
    # an id in range is a page (empty), and a list of ids is held alike
    assert reader.post("/rpc/search_tasks", json={"kwargs": {"after_id": 2**63 - 1}}).json() == {
        "result": []
    }
    listed = reader.post("/rpc/get_tasks", json={"kwargs": {"ids": [1, -(10**30)]}})
    assert listed.status_code == 422, listed.text
    assert listed.json()["detail"][0]["loc"] == ["body", "ids[1]"]


@pytest.mark.parametrize("limit", [-1, 0])
def test_a_limit_below_one_is_a_422_naming_it(
    store: SQLAlchemyStore,
    sleep_type: TaskType,
    now: datetime,
    reader: httpx.Client,
    limit: int,
) -> None:
    task_id = _task_with_a_run(store, now)
    assert len(reader.post("/rpc/get_task_runs", json={"args": [task_id]}).json()["result"]) == 1
    for method, args in (
        ("get_task_runs", [task_id]),
        ("search_tasks", []),
        ("list_pending", ["sleep"]),
        ("waiting_entries", ["sleep", "normal"]),
    ):
        kwargs: dict[str, Any] = {"limit": limit}
        if method == "list_pending":
            kwargs["now"] = wire.encode(now)
        answer = reader.post(f"/rpc/{method}", json={"args": args, "kwargs": kwargs})
        assert answer.status_code == 422, (method, answer.text)
        assert answer.json()["detail"][0]["loc"] == ["body", "kwargs", "limit"], method
    # REST alike
    for path in ("/tasks", f"/tasks/{task_id}/runs"):
        answer = reader.get(path, params={"limit": limit})
        assert answer.status_code == 422, (path, answer.text)
        assert answer.json()["detail"][0]["loc"] == ["query", "limit"]


def test_the_store_itself_refuses_a_limit_below_one(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    """SQLite reads LIMIT -1 as no limit: every run of the task came back."""
    task_id = _task_with_a_run(store, now)
    for call in (
        lambda: store.get_task_runs(task_id, limit=-1),
        lambda: store.list_pending("sleep", now=now, limit=0),
    ):
        with pytest.raises(InvalidInput) as refused:
            call()
        assert refused.value.field == "limit"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_or_an_infinity_in_an_origins_loader_arguments_is_a_422_writing_nothing(
    store: SQLAlchemyStore, client: httpx.Client, number: str
) -> None:
    store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
    lister = store.get_or_create_lister("gitlab", "framagit")
    assert lister.id is not None
    good = ListedOrigin(
        lister_id=lister.id, url="https://e.org/good", visit_type="git", extra_loader_arguments={}
    )
    bad = ListedOrigin(
        lister_id=lister.id, url="https://e.org/bad", visit_type="git", extra_loader_arguments={}
    )
    origins = wire.encode([good, bad])
    origins[1]["fields"]["extra_loader_arguments"] = {"depth": "NUMBER"}
    # the number as JSON text: Python's parser reads it as a float (nan, inf)
    body = json.dumps({"args": [origins]}).replace('"NUMBER"', number)
    answer = client.post(
        "/rpc/record_listed_origins", content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422, answer.text
    [detail] = answer.json()["detail"]
    assert detail["loc"][:2] == ["body", "extra_loader_arguments"], detail
    assert "NaN and infinities are not JSON numbers" in detail["msg"]
    assert store.get_listed_origins(lister_id=lister.id).origins == ()


def test_a_value_the_database_refuses_is_a_422_not_an_outage(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    """Past the door (a local caller, a record's own field): an integer past
    64 bits is the caller's value (SQLite's OverflowError, PostgreSQL's
    'bigint out of range'), not a database out of reach."""
    for call in (
        lambda: store.get_tasks([10**30]),
        lambda: store.search_tasks(after_id=-(10**30)),
    ):
        with pytest.raises(InvalidInput) as refused:
            call()
        assert refused.value.field == "arguments"
        assert "cannot reach" not in str(refused.value)
