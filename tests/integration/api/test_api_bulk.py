"""``POST /tasks/bulk/{action}`` over a real server (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
import pytest
from api_server import WRITER, Clock, serving

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app

H = timedelta(hours=1)


@pytest.fixture
def tasks(store: SQLAlchemyStore, sleep_type: TaskType, now: datetime) -> list[Task]:
    return store.create_tasks(
        [
            Task(
                type="sleep",
                args=(n,),
                kwargs={"site": "a" if n < 5 else "b"},
                key=f"k/{n}",
                next_run=now - H,
                deadline=now,
                schedule_kind=ScheduleKind.ONESHOT,
            )
            for n in range(8)
        ],
        now=now,
    )


def statuses(store: SQLAlchemyStore) -> list[str]:
    return [t.status.value for t in store.search_tasks(limit=100)]


def test_only_a_writer_acts(
    client: httpx.Client,
    reader: httpx.Client,
    anonymous: httpx.Client,
    store: SQLAlchemyStore,
    tasks: list[Task],
) -> None:
    body = {"type": "sleep"}
    assert reader.post("/tasks/bulk/disable", json=body).status_code == 403
    assert reader.post("/tasks/bulk/disable", json={**body, "dry_run": True}).status_code == 403
    assert anonymous.post("/tasks/bulk/disable", json=body).status_code == 401
    assert set(statuses(store)) == {"waiting"}
    answer = client.post("/tasks/bulk/disable", json={**body, "dry_run": True})
    assert answer.status_code == 200
    assert answer.json() == {
        "action": "disable",
        "dry_run": True,
        "matched": 8,
        "changed": 0,
        "held": 0,
        "sample": [t.id for t in tasks],
        "next_after_id": None,
        "revoke_error": None,
    }
    assert set(statuses(store)) == {"waiting"}


def test_bad_filters_are_refused_naming_the_field(
    client: httpx.Client, store: SQLAlchemyStore, tasks: list[Task]
) -> None:
    for action, body, field in [
        ("disable", {}, "filter"),
        ("disable", {"condition": ["FINE"]}, "condition"),
        ("disable", {"arguments": {"not a name": 1}}, "arguments"),
        ("disable", {"type": "sleep", "scan": 10**6}, "scan"),
        ("disable", {"type": "sleep", "colour": "red"}, "colour"),
        ("explode", {"type": "sleep"}, "action"),
    ]:
        answer = client.post(f"/tasks/bulk/{action}", json=body)
        assert answer.status_code == 422, (body, answer.text)
        assert field in answer.text, answer.text
    assert set(statuses(store)) == {"waiting"}


def test_windows_until_done(
    client: httpx.Client, store: SQLAlchemyStore, tasks: list[Task]
) -> None:
    body = {"arguments": {"site": "a"}, "scan": 3, "batch_size": 2}
    seen, after, calls = 0, 0, 0
    while after is not None:
        answer = client.post("/tasks/bulk/cancel", json={**body, "after_id": after}).json()
        seen += answer["changed"]
        after, calls = answer["next_after_id"], calls + 1
    assert (seen, calls) == (5, 3)  # 8 tasks read 3 at a time
    assert statuses(store) == ["cancelled"] * 5 + ["waiting"] * 3
    gone = client.post("/tasks/bulk/delete", json={"status": ["cancelled"]}).json()
    assert (gone["matched"], gone["changed"]) == (5, 5)
    assert statuses(store) == ["waiting"] * 3


def test_cancel_revokes_the_dispatched_runs(
    store: SQLAlchemyStore, tasks: list[Task], now: datetime
) -> None:
    revoked: list[list[str]] = []

    def revoke(backend_ids: list[str]) -> str | None:
        revoked.append(list(backend_ids))
        return None

    claimed = store.claim_ready_tasks("sleep", now=now, limit=2)
    settings = ApiSettings(tokens=parse_tokens(f"{WRITER}:rw"))
    app = create_app(store, settings, clock=Clock(now), revoke=revoke)  # type: ignore[arg-type]
    with serving(app) as url, httpx.Client(base_url=url) as http:
        headers = {"Authorization": f"Bearer {WRITER}"}
        answer = http.post("/tasks/bulk/cancel", json={"all": True}, headers=headers).json()
    assert (answer["changed"], answer["revoke_error"]) == (8, None)
    assert revoked == [[c.backend_id for c in claimed]]
    assert {t.status for t in store.search_tasks(limit=100)} == {TaskStatus.CANCELLED}
