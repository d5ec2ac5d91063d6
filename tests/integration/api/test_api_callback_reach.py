"""One callback rule at every door that takes a URL a worker will call:
``POST /tasks`` (a ``webhook`` task's ``url``), ``PUT /jobs``, ``/rpc``
(``create_tasks``, ``import_tasks``, ``update_task``, ``edit_task``,
``put_job``) and ``PATCH /tasks/{id}``; the setting ``callback_allow``
widens it at each."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

import httpx
import pytest
from api_server import WRITER, Clock, remote, serving
from test_api import only_error

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.intake.jobs import job_from_input
from swh_like_scheduler.plumbing.reach import Reach
from swh_like_scheduler.store import SQLAlchemyStore, TaskFilter, wire
from swh_like_scheduler.web import create_app

WEBHOOK = "swh_like_workers.webhook.post"
#: loopback in three disguises, and the metadata service in a fourth
INSIDE = [
    "http://127.0.0.1:5432/",
    "http://2130706433/",
    "http://[64:ff9b::7f00:1]/",
    "http://0xa9fea9fe/latest/meta-data/",
]
PUBLIC = "https://hooks.example.org/in"


@pytest.fixture
def webhook_types(store: SQLAlchemyStore) -> None:
    """The shipped type, and a second one over the same worker."""
    store.create_task_type(TaskType(type="webhook", backend_name=WEBHOOK))
    store.create_task_type(TaskType(type="hooks", backend_name=WEBHOOK))


@contextmanager
def api(store: Any, reach: Reach, clock: Clock) -> Iterator[httpx.Client]:
    """A writer's client of an app over ``store`` whose settings allow ``reach``."""
    settings = ApiSettings(tokens=parse_tokens([f"{WRITER}:rw"]), reach=reach)
    with serving(create_app(store, settings, clock=clock)) as url:
        headers = {"Authorization": f"Bearer {WRITER}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            yield client


def _new(type_name: str, url: str, *, positional: bool = False) -> dict[str, Any]:
    if positional:
        return {"type": type_name, "policy": "oneshot", "args": [url, {}, "k"]}
    kwargs = {"url": url, "payload": {}, "idempotency_key": "k"}
    return {"type": type_name, "policy": "oneshot", "kwargs": kwargs}


def _task(type_name: str, url: str, now: datetime) -> Task:
    return Task(
        type=type_name,
        next_run=now,
        deadline=now,
        schedule_kind=ScheduleKind.ONESHOT,
        kwargs={"url": url, "payload": {}, "idempotency_key": "k"},
    )


def _job(url: str) -> dict[str, Any]:
    return {
        "schedules": ["2026-03-02T14:00:00Z"],
        "callback": {"type": "http", "data": {"url": url, "payload": {}}},
    }


def test_post_tasks_refuses_a_webhook_url_inside_as_put_jobs_does(
    client: httpx.Client, store: SQLAlchemyStore, webhook_types: None
) -> None:
    """A webhook task to loopback answered 201 where a job to it was a 422."""
    for url in INSIDE:
        for type_name in ("webhook", "hooks"):
            refused = client.post("/tasks", json={"tasks": [_new(type_name, url)]})
            assert only_error(refused)[0] == ["body", "tasks", 0, "kwargs", "url"], url
            # the positional form, after a good task: all or none
            batch = [_new(type_name, PUBLIC), _new(type_name, url, positional=True)]
            refused = client.post("/tasks", json={"tasks": batch})
            assert only_error(refused)[0] == ["body", "tasks", 1, "args", 0], url
        job = client.put("/jobs/inside", json=_job(url))
        assert only_error(job)[0] == ["body", "callback", "data", "url"], url
    assert store.search_tasks(TaskFilter(type="webhook")) == []
    assert store.search_tasks(TaskFilter(type="hooks")) == []
    created = client.post("/tasks", json={"tasks": [_new("webhook", PUBLIC)]})
    assert created.status_code == 201, created.text
    assert client.put("/jobs/outside", json=_job(PUBLIC)).status_code == 201


def test_callback_allow_widens_post_tasks_and_put_jobs(
    store: SQLAlchemyStore, webhook_types: None, clock: Clock
) -> None:
    allowed = Reach.parse("127.0.0.0/8, 169.254.169.254")
    with api(store, allowed, clock) as client:
        for index, url in enumerate(INSIDE):
            created = client.post("/tasks", json={"tasks": [_new("webhook", url)]})
            assert created.status_code == 201, (url, created.text)
            assert client.put(f"/jobs/allowed-{index}", json=_job(url)).status_code == 201
        refused = client.post("/tasks", json={"tasks": [_new("webhook", "http://[::1]/")]})
        assert only_error(refused)[0][-2:] == ["kwargs", "url"]


def test_rpc_writes_refuse_a_callback_url_inside(
    store: SQLAlchemyStore, webhook_types: None, now: datetime
) -> None:
    [kept] = store.create_tasks([_task("webhook", PUBLIC, now)], now=now)
    with remote(store) as client:
        for url in INSIDE:
            with pytest.raises(InvalidInput) as refused:
                client.create_tasks(
                    [_task("sleep", PUBLIC, now), _task("hooks", url, now)], now=now
                )
            assert refused.value.field == "tasks[1].kwargs.url" and "not public" in str(
                refused.value
            )
            with pytest.raises(InvalidInput) as refused:
                client.import_tasks([_task("webhook", url, now)], now=now)
            assert refused.value.field == "tasks[0].kwargs.url"
            inside = {**kept.kwargs, "url": url}
            with pytest.raises(InvalidInput) as refused:
                client.update_task(replace(kept, kwargs=inside))
            assert refused.value.field == "task.kwargs.url"
            with pytest.raises(InvalidInput) as refused:
                client.edit_task(task_id=kept.id, changes={"kwargs": inside}, now=now)
            assert refused.value.field == "kwargs.url"
            # a job made where loopback is allowed, sent to a server where it is not
            job = job_from_input("inside", _job(url), reach=Reach.parse("0.0.0.0/0"))
            with pytest.raises(InvalidInput) as refused:
                client.put_job(job, now=now)
            assert refused.value.field == "callback.data.url"
    assert store.get_tasks([kept.id])[0].kwargs["url"] == PUBLIC
    assert [t.id for t in store.search_tasks(TaskFilter(type="webhook"))] == [kept.id]
    assert store.search_tasks(TaskFilter(type="hooks")) == []
    assert store.get_job("inside") is None


def test_rpc_create_tasks_is_a_422_over_http_and_callback_allow_widens_it(
    store: SQLAlchemyStore, webhook_types: None, now: datetime, clock: Clock
) -> None:
    body = {
        "args": wire.encode([[_task("webhook", "http://2130706433:9/", now)]]),
        "kwargs": wire.encode({"now": now}),
    }
    with api(store, Reach(), clock) as client:
        refused = client.post("/rpc/create_tasks", json=body)
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["class"] == "InvalidInput" and error["state"]["field"] == "tasks[0].kwargs.url"
    with api(store, Reach.parse("127.0.0.1"), clock) as client:
        created = client.post("/rpc/create_tasks", json=body)
        assert created.status_code == 200, created.text
    assert len(store.search_tasks(TaskFilter(type="webhook"))) == 1


def test_an_edit_cannot_move_a_webhook_inside(
    store: SQLAlchemyStore, webhook_types: None, now: datetime, clock: Clock
) -> None:
    [task] = store.create_tasks([_task("webhook", PUBLIC, now)], now=now)
    with api(store, Reach(), clock) as client:
        for url in INSIDE:
            edit = client.patch(f"/tasks/{task.id}", json={"kwargs": {**task.kwargs, "url": url}})
            assert only_error(edit)[0] == ["body", "kwargs", "url"], url
        moved = client.patch(
            f"/tasks/{task.id}", json={"kwargs": {**task.kwargs, "url": "https://8.8.8.8/"}}
        )
        assert moved.status_code == 200, moved.text
        # an edit of another field leaves the URL alone
        assert client.patch(f"/tasks/{task.id}", json={"priority": "high"}).status_code == 200
    assert store.get_tasks([task.id])[0].kwargs["url"] == "https://8.8.8.8/"
