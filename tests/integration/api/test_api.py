"""The HTTP API over a real server, against SQLite and PostgreSQL."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from api_server import READER, WRITER, Clock, serving
from waiting import wait_until

from swh_like_scheduler.api import ApiSettings, parse_tokens, routes_observe
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.monitor import WorkerSighting
from swh_like_scheduler.store import SQLAlchemyStore, TaskFilter
from swh_like_scheduler.web import create_app

SLEEP_TASK = {"type": "sleep", "args": [1]}


def detail(response: httpx.Response) -> Any:
    return response.json()["detail"]


def only_error(response: httpx.Response) -> tuple[list[Any], str]:
    """``(loc, msg)`` of a 422 with one error."""
    assert response.status_code == 422, response.text
    (error,) = detail(response)
    return error["loc"], error["msg"]


# -- access -----------------------------------------------------------------


def test_reads_and_writes_need_a_token(
    anonymous: httpx.Client, reader: httpx.Client, sleep_type: TaskType
) -> None:
    refused = anonymous.get("/task-types")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    assert anonymous.post("/tasks", json={"tasks": [SLEEP_TASK]}).status_code == 401
    wrong = anonymous.get("/tasks", headers={"Authorization": f"Bearer {WRITER}x"})
    assert wrong.status_code == 401
    assert reader.get("/task-types").json()[0]["type"] == "sleep"
    read_only = reader.post("/tasks", json={"tasks": [SLEEP_TASK]})
    assert read_only.status_code == 403
    assert "only read" in detail(read_only)
    assert anonymous.get("/health").status_code == 200  # open to probes


def test_open_reads_let_gets_through_only(store: SQLAlchemyStore, clock: Clock) -> None:
    settings = ApiSettings(tokens=parse_tokens([f"{WRITER}:rw"]), open_reads=True)
    with (
        serving(create_app(store, settings, clock=clock)) as url,
        httpx.Client(base_url=url) as http,
    ):
        assert http.get("/task-types").status_code == 200
        assert http.post("/task-types", json={"type": "x", "backend_name": "y"}).status_code == 401


def test_tokens_are_checked_when_read() -> None:
    with pytest.raises(InvalidInput, match="api_tokens: token 2 is shorter than 16"):
        parse_tokens(f"{WRITER}:rw,short:ro")
    (token,) = parse_tokens(f"{READER}:ro")
    assert READER not in repr(token)


# -- task types ---------------------------------------------------------------


def test_task_types(client: httpx.Client) -> None:
    body = {"type": "load-git", "backend_name": "loaders.git", "default_interval": "1 day"}
    created = client.post("/task-types", json=body)
    assert created.status_code == 201
    assert created.json()["default_interval"] == 86400.0
    assert client.get("/task-types/load-git").json()["queue"] == "loaders.git"
    assert client.post("/task-types", json=body).status_code == 409
    assert client.get("/task-types/nope").status_code == 404
    bad = client.post("/task-types", json={**body, "type": "t2", "retry_delay": "soon"})
    loc, msg = only_error(bad)
    assert loc == ["body", "retry_delay"] and "'soon' is not a duration" in msg
    assert [t["type"] for t in client.get("/task-types").json()] == ["load-git"]


def test_pause_and_resume_a_task_type(
    client: httpx.Client, reader: httpx.Client, clock: Clock, sleep_type: TaskType
) -> None:
    assert client.get("/task-types/sleep").json()["paused_at"] is None
    assert reader.post("/task-types/sleep/pause").status_code == 403  # a write
    paused = client.post("/task-types/sleep/pause")
    assert paused.status_code == 200
    assert paused.json()["paused_at"] == clock.now.isoformat()
    assert paused.json()["type"] == "sleep" and paused.json()["queue"] == sleep_type.effective_queue
    clock.now += timedelta(hours=1)
    again = client.post("/task-types/sleep/pause").json()
    assert again["paused_at"] == (clock.now - timedelta(hours=1)).isoformat()  # the first
    assert reader.get("/task-types").json()[0]["paused_at"] == again["paused_at"]
    resumed = client.post("/task-types/sleep/resume")
    assert resumed.status_code == 200 and resumed.json()["paused_at"] is None
    assert client.get("/task-types/sleep").json()["paused_at"] is None
    for action in ("pause", "resume"):
        unknown = client.post(f"/task-types/nope/{action}")
        assert unknown.status_code == 404 and "nope" in detail(unknown)
    # the type's settings are not the way to pause it
    sneaky = client.post("/task-types", json={"type": "t", "backend_name": "b", "paused_at": "x"})
    assert sneaky.status_code == 422


# -- tasks --------------------------------------------------------------------


def test_bulk_create_is_all_or_none(
    client: httpx.Client, store: SQLAlchemyStore, sleep_type: TaskType
) -> None:
    bad = client.post(
        "/tasks", json={"tasks": [SLEEP_TASK, {"type": "sleep", "cron": "61 * * * *"}]}
    )
    loc, msg = only_error(bad)
    assert loc == ["body", "tasks", 1, "cron"], msg
    unknown = client.post("/tasks", json={"tasks": [SLEEP_TASK, {"type": "nope"}]})
    assert only_error(unknown)[0] == ["body", "tasks", 1, "type"]
    extra = client.post("/tasks", json={"tasks": [{"type": "sleep", "intervall": 5}]})
    assert only_error(extra)[0] == ["body", "tasks", 0, "intervall"]
    too_many = client.post("/tasks", json={"tasks": [SLEEP_TASK] * 1001})
    assert only_error(too_many)[0] == ["body", "tasks"]
    assert store.count_tasks() == 0
    created = client.post(
        "/tasks",
        json={
            "tasks": [
                {"type": "sleep", "args": [1], "key": "k1", "interval": 3600},
                {"type": "sleep", "kind": "cron", "cron": "0 3 * * *", "tz": "Europe/Paris"},
                {"type": "sleep", "policy": "oneshot", "next_run": "2026-03-02T08:00:00Z"},
            ]
        },
    )
    assert created.status_code == 201, created.text
    kinds = [t["schedule_kind"] for t in created.json()["tasks"]]
    assert kinds == ["adaptive", "cron", "oneshot"]
    assert store.count_tasks() == 3


def test_a_key_with_another_definition_is_a_conflict(
    client: httpx.Client, store: SQLAlchemyStore, sleep_type: TaskType
) -> None:
    first = client.post("/tasks", json={"tasks": [{**SLEEP_TASK, "key": "same"}]})
    again = client.post("/tasks", json={"tasks": [{**SLEEP_TASK, "key": "same"}]})
    assert first.json()["tasks"][0]["id"] == again.json()["tasks"][0]["id"]
    other = client.post("/tasks", json={"tasks": [{"type": "sleep", "args": [2], "key": "same"}]})
    assert other.status_code == 409
    assert "same" in detail(other)
    assert client.get("/tasks/by-key/same").json()["args"] == [1]
    assert store.count_tasks() == 1


def test_search_pages_by_id(client: httpx.Client, sleep_type: TaskType) -> None:
    tasks = [{"type": "sleep", "args": [i]} for i in range(25)]
    ids = [t["id"] for t in client.post("/tasks", json={"tasks": tasks}).json()["tasks"]]
    client.post(f"/tasks/{ids[0]}/disable")
    seen: list[int] = []
    after: int | None = 0
    while after is not None:
        page = client.get("/tasks", params={"after_id": after, "limit": 10}).json()
        seen.extend(t["id"] for t in page["tasks"])
        after = page["next_after_id"]
    assert seen == sorted(ids)
    waiting = client.get("/tasks", params={"status": "waiting", "limit": 1000}).json()
    assert len(waiting["tasks"]) == 24 and waiting["next_after_id"] is None
    both = client.get("/tasks", params=[("status", "waiting"), ("status", "disabled")]).json()
    assert len(both["tasks"]) == 25
    loc, msg = only_error(client.get("/tasks", params={"next_run_before": "yesterday"}))
    assert loc == ["query", "next_run_before"], msg
    assert only_error(client.get("/tasks", params={"limit": 0}))[0] == ["query", "limit"]


def test_actions(client: httpx.Client, store: SQLAlchemyStore, sleep_type: TaskType) -> None:
    (task,) = client.post("/tasks", json={"tasks": [SLEEP_TASK]}).json()["tasks"]
    path = f"/tasks/{task['id']}"
    disabled = client.post(f"{path}/disable").json()
    assert disabled["changed"] and disabled["task"]["status"] == "disabled"
    assert client.post(f"{path}/disable").json()["changed"] is False
    assert client.post(f"{path}/enable").json()["task"]["status"] == "waiting"
    later = client.post(f"{path}/respawn", json={"next_run": "2030-01-01T00:00:00Z"}).json()
    assert later["task"]["next_run"] == "2030-01-01T00:00:00+00:00"
    assert client.post(f"{path}/cancel").json()["task"]["status"] == "cancelled"
    (stored,) = store.get_tasks([task["id"]])
    assert stored.status is TaskStatus.CANCELLED
    assert client.post("/tasks/999999/cancel").status_code == 404
    assert client.get("/tasks/0").status_code == 422
    assert client.get(f"/tasks/{2**64}").status_code == 422


def test_explain_runs_and_run(
    client: httpx.Client, store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    (task,) = client.post("/tasks", json={"tasks": [SLEEP_TASK]}).json()["tasks"]
    (claimed,) = store.claim_ready_tasks("sleep", now=now + timedelta(seconds=1), limit=10)
    runs = client.get(f"/tasks/{task['id']}/runs").json()
    assert [r["backend_id"] for r in runs] == [claimed.backend_id]
    run = client.get(f"/runs/{claimed.backend_id}").json()
    assert run["status"] == "scheduled" and run["task_id"] == task["id"]
    assert client.get("/runs/nope").status_code == 404
    explained = client.get(f"/tasks/{task['id']}/explain", params={"at": now.isoformat()}).json()
    assert explained["condition"]["level"] == "OK"
    assert only_error(client.get(f"/tasks/{task['id']}/explain", params={"at": "x"}))[0] == [
        "query",
        "at",
    ]


def test_conditions_and_metrics(
    client: httpx.Client, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    tasks = [{"type": "sleep", "args": [i], "interval": "1h"} for i in range(3)]
    client.post("/tasks", json={"tasks": tasks})
    clock.now += timedelta(days=2)  # all three far past their deadline
    summary = client.get("/conditions", params={"show": "ERROR"}).json()
    assert {t["reason"] for t in summary["tasks"]} == {"never_run"}
    assert summary["next_after_id"] is None  # the whole table was read
    # the counts come from the background count (as /metrics's)
    expected = {"sleep": {"OK": 0, "WARNING": 0, "ERROR": 3}}
    wait_until(
        lambda: client.get("/conditions").json()["counts"] == expected, 30, "the tasks counted"
    )
    assert client.get("/conditions").json()["counts_age_seconds"] >= 0
    # paged: one task per page, each page continuing after the last
    first = client.get("/conditions", params={"show": "ERROR", "limit": 1}).json()
    assert len(first["tasks"]) == 1 and first["next_after_id"] == first["tasks"][0]["id"]
    second = client.get(
        "/conditions", params={"show": "ERROR", "limit": 1, "after_id": first["next_after_id"]}
    ).json()
    assert second["tasks"][0]["id"] > first["tasks"][0]["id"]
    text = client.get("/metrics").text
    overdue = next(
        line for line in text.splitlines() if line.startswith("swh_scheduler_oldest_overdue")
    )
    assert float(overdue.split()[-1]) > 86400
    # the whole-table counts are made in the background: a later scrape has them
    errors = 'swh_scheduler_task_conditions{condition="ERROR",type="sleep"} 3.0'
    wait_until(lambda: errors in client.get("/metrics").text, 30, "the tasks counted")
    text = client.get("/metrics").text
    assert 'swh_scheduler_tasks{status="waiting",type="sleep"} 3.0' in text
    assert "swh_scheduler_counts_age_seconds " in text
    # runs ended within the hour, per type and status
    (claimed, *_) = store.claim_ready_tasks("sleep", now=clock.now, limit=10)
    store.end_task_run(claimed.backend_id, status=RunStatus.FAILED, ended=clock.now)
    ended = 'swh_scheduler_runs_ended_last_hour{status="failed",type="sleep"} 1.0'
    assert ended in client.get("/metrics").text
    # the open runs, counted in the background (2 of the 3 claims are open)
    opened = 'swh_scheduler_runs_open{status="scheduled",type="sleep"} 2.0'
    wait_until(lambda: opened in client.get("/metrics").text, 30, "the open runs counted")
    assert "swh_scheduler_runs_open_age_seconds " in client.get("/metrics").text
    # one-shot tasks expired within the hour, per type (0 for a type with none)
    assert 'swh_scheduler_oneshots_expired_last_hour{type="sleep"} 0.0' in text
    late = {"type": "sleep", "args": [9], "kind": "oneshot", "next_run": clock.now.isoformat()}
    late["max_delay"] = "1 s"
    client.post("/tasks", json={"tasks": [late]})
    store.record_room("sleep", at=clock.now + timedelta(minutes=10))
    assert len(store.expire_oneshot_tasks(now=clock.now + timedelta(minutes=10))) == 1
    clock.now += timedelta(minutes=10)
    text = client.get("/metrics").text
    assert 'swh_scheduler_oneshots_expired_last_hour{type="sleep"} 1.0' in text, text
    assert client.get("/conditions", params={"type": "nope"}).status_code == 404


def test_health(store: SQLAlchemyStore, clock: Clock, anonymous: httpx.Client) -> None:
    assert anonymous.get("/health").json()["database"] == {"ok": True}
    broken = create_app(store, clock=clock, broker_check=lambda: "ConnectionRefusedError")
    with serving(broken) as url:
        answer = httpx.get(f"{url}/health")
    assert answer.status_code == 503
    assert answer.json()["broker"] == {"ok": False}
    assert answer.json()["reasons"] == ["the broker does not answer"]


def test_health_is_degraded_while_work_waits_and_no_runner_passes(
    store: SQLAlchemyStore,
    clock: Clock,
    anonymous: httpx.Client,
    sleep_type: TaskType,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every daemon stopped and tasks overdue: degraded, with the reasons;
    a runner's claim and a worker's sign of life make it ok again."""
    tasks = [
        Task(
            type="sleep",
            args=(n,),
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=timedelta(hours=1),
            next_run=clock.now,
            deadline=clock.now + timedelta(minutes=30),
        )
        for n in range(3)
    ]
    store.create_tasks(tasks, now=clock.now)
    assert anonymous.get("/health").status_code == 200  # nothing late yet
    clock.now += timedelta(hours=3)  # overdue for hours, no runner seen
    answer = anonymous.get("/health")
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "degraded"
    [reason] = body["reasons"]
    assert reason.startswith(
        "no runner has ever claimed a task or had room, while task type sleep has tasks overdue"
    )
    # a runner claims: the runs are open, and no worker was ever seen
    claimed = store.claim_ready_tasks("sleep", now=clock.now, limit=10)
    clock.now += timedelta(minutes=5)
    silent, queue = anonymous.get("/health").json()["reasons"]
    assert silent.startswith(
        "no worker sign of life has ever been recorded, while runs have been open for"
    )
    # and the runs wait in the broker past their deadline: late too
    assert queue == (
        "the queue of sleep holds 3 run(s) not started, the oldest late by 2h35m "
        "(workers not keeping up)"
    )
    store.record_worker_sightings([WorkerSighting("w@n", clock.now, True, 2.0)])
    body = anonymous.get("/health").json()
    assert [r[:22] for r in body["reasons"]] == ["the queue of sleep hol"]
    assert body["queued"] == {
        "sleep": {"runs": 3, "runs_at_least": False, "oldest_late_seconds": 9300.0}
    }
    assert body["oldest_overdue_seconds"] == {"sleep": 9300.0}
    # a deep queue is counted up to a bound; how late its oldest is, exactly
    monkeypatch.setattr(routes_observe, "QUEUED_COUNTED", 2)
    body = anonymous.get("/health").json()
    assert body["reasons"][0].startswith("the queue of sleep holds at least 2 runs not started")
    assert body["queued"]["sleep"] == {
        "runs": 2,
        "runs_at_least": True,
        "oldest_late_seconds": 9300.0,
    }
    for run in claimed:  # the workers take them: nothing waits any more
        store.start_task_run(run.backend_id, started=clock.now, worker="w@n")
    assert anonymous.get("/health").status_code == 200


def test_health_without_a_database(clock: Clock) -> None:
    unreachable = SQLAlchemyStore.from_url("postgresql://nobody@127.0.0.1:9/none")
    try:
        with serving(create_app(unreachable, clock=clock)) as url:
            answer = httpx.get(f"{url}/health", timeout=30)
    finally:
        unreachable.close()
    assert answer.status_code == 503
    assert answer.json()["database"]["ok"] is False
    assert "127.0.0.1" not in answer.text and ":9" not in answer.text  # no host in open answers


def test_body_size_limit(store: SQLAlchemyStore, clock: Clock, sleep_type: TaskType) -> None:
    settings = ApiSettings(tokens=parse_tokens([f"{WRITER}:rw"]), max_body_bytes=1000)
    headers = {"Authorization": f"Bearer {WRITER}"}
    big = {"tasks": [{"type": "sleep", "args": ["x" * 2000]}]}
    with serving(create_app(store, settings, clock=clock)) as url:
        declared = httpx.post(f"{url}/tasks", json=big, headers=headers)
        assert declared.status_code == 413
        streamed = httpx.post(
            f"{url}/tasks", content=iter([b'{"tasks": [', b" " * 2000, b"]}"]), headers=headers
        )
        assert streamed.status_code == 413
    assert store.count_tasks(TaskFilter()) == 0


@pytest.mark.parametrize(
    ("field", "raw"),
    [
        ("args", b'["a\\u0000"]'),
        ("kwargs", b'{"\\u0000": 1}'),
        ("key", b'"k\\u0000"'),
        ("dont_run_on_nodes", b'["\\u0000"]'),
        ("args", b'["\\ud800"]'),
        ("cron", b'"0 3 * * *\\u0000"'),
    ],
)
def test_text_no_database_stores_is_refused(
    client: httpx.Client, store: SQLAlchemyStore, sleep_type: TaskType, field: str, raw: bytes
) -> None:
    body = b'{"tasks": [{"type": "sleep", "%s": %s}]}' % (field.encode(), raw)
    answer = client.post("/tasks", content=body, headers={"content-type": "application/json"})
    loc, msg = only_error(answer)
    assert loc[:3] == ["body", "tasks", 0] and loc[3] == field, msg
    assert store.count_tasks() == 0
    assert only_error(client.get("/tasks", params={"key_prefix": "a\x00"}))[0] == [
        "query",
        "key_prefix",
    ]


SEED_JOB = {
    "key": "training-invitations-42",
    "schedules": ["2026-03-02T14:00:00Z", "2026-03-03T14:00:00Z"],
    "callback": {
        "type": "rabbitmq",
        "data": {"queue": "training.invitations.notifications", "payload": {"id": "42"}},
    },
}


def test_jobs_by_key(client: httpx.Client, reader: httpx.Client, store: SQLAlchemyStore) -> None:
    path = "/jobs/training-invitations-42"
    unregistered = client.put(path, json=SEED_JOB)
    assert only_error(unregistered)[0] == ["body", "callback", "type"]
    store.create_task_type(TaskType(type="notify", backend_name="notify"))
    created = client.put(path, json=SEED_JOB)
    assert created.status_code == 201, created.text
    assert [i["state"] for i in created.json()["instants"]] == ["pending", "pending"]
    changed = client.put(path, json={**SEED_JOB, "schedules": ["2026-03-03T14:00:00Z"]})
    assert changed.status_code == 200
    assert changed.json()["removed"] == ["2026-03-02T14:00:00+00:00"]
    shown = reader.get(path).json()
    assert [(i["at"], i["state"]) for i in shown["instants"]] == [
        ("2026-03-02T14:00:00+00:00", "cancelled"),
        ("2026-03-03T14:00:00+00:00", "pending"),
    ]
    assert reader.delete(path).status_code == 403
    deleted = client.delete(path).json()
    assert deleted["removed"] == ["2026-03-03T14:00:00+00:00"]
    assert client.delete("/jobs/nope").status_code == 404
    assert client.get("/jobs/nope").status_code == 404
    bad = client.put(path, json={**SEED_JOB, "schedules": ["2026-03-03T14:00:00Z", "soon"]})
    assert only_error(bad)[0] == ["body", "schedules", 1]
    other = client.put(path, json={**SEED_JOB, "key": "other"})
    assert only_error(other)[0] == ["body", "key"]
    # no instant at all: refused (it answered 201, then GET said 404)
    empty = client.put("/jobs/empty", json={**SEED_JOB, "schedules": []})
    assert only_error(empty)[0] == ["body", "schedules"]
    assert client.get("/jobs/empty").status_code == 404


def test_http_callbacks_keep_their_secrets_and_stay_outside(
    client: httpx.Client, reader: httpx.Client, store: SQLAlchemyStore
) -> None:
    """Header values are written, never read back (a reader sees ``***``,
    the worker's task keeps them); a callback to a metadata, loopback or
    private address is refused unless allowed; a header with a line break
    is refused."""
    store.create_task_type(TaskType(type="webhook", backend_name="webhook"))
    secret = "Bearer hook-secret-0123"
    body = {
        "schedules": ["2026-03-02T14:00:00Z"],
        "callback": {
            "type": "http",
            "data": {"url": "https://hooks.example.org/in", "headers": {"Authorization": secret}},
        },
    }
    assert client.put("/jobs/hooked", json=body).status_code == 201
    [task] = store.search_tasks(TaskFilter(key_prefix="hooked@"))
    assert task.kwargs["headers"] == {"Authorization": secret}  # kept for the worker
    for reading in (
        reader.get(f"/tasks/{task.id}"),
        reader.get("/tasks"),
        reader.post("/rpc/get_tasks", json={"args": [[task.id]]}),
        reader.post("/rpc/get_job", json={"args": ["hooked"]}),
    ):
        assert reading.status_code == 200, reading.text
        assert "hook-secret" not in reading.text and "***" in reading.text
    for url in (
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1:5432/",
        "http://localhost/admin",
        "http://10.1.2.3/",
        "http://[::1]/",
    ):
        refused = client.put(
            "/jobs/ssrf", json={**body, "callback": {"type": "http", "data": {"url": url}}}
        )
        assert only_error(refused)[0] == ["body", "callback", "data", "url"], (url, refused.text)
    crlf = {"url": "https://hooks.example.org/", "headers": {"X-A": "1\r\nX-Injected: 2"}}
    refused = client.put("/jobs/crlf", json={**body, "callback": {"type": "http", "data": crlf}})
    assert only_error(refused)[0][:4] == ["body", "callback", "data", "headers"]


def test_rpc_reads_are_capped(
    reader: httpx.Client, client: httpx.Client, sleep_type: TaskType
) -> None:
    """A read-only token cannot make the server read a whole table at once:
    a limit or an id list past the cap is a 422 naming it."""
    huge = reader.post("/rpc/search_tasks", json={"kwargs": {"limit": 1_000_000}})
    assert huge.status_code == 422
    assert only_error(huge)[0][-2:] == ["kwargs", "limit"]
    many = reader.post("/rpc/get_tasks", json={"args": [list(range(20_000))]})
    assert only_error(many)[0][-2:] == ["kwargs", "ids"]
    assert reader.post("/rpc/search_tasks", json={"kwargs": {"limit": 1_000}}).status_code == 200
    assert reader.post("/rpc/search_tasks", json={"kwargs": {"limit": 1_001}}).status_code == 422
    assert reader.post("/rpc/search_tasks", json={}).status_code == 200  # its default (100)
    # a write with a read token: refused before its body is read
    assert reader.post("/rpc/create_tasks", json={"args": [[]]}).status_code == 403


def test_deep_or_incomplete_input_is_a_422_and_reads_stay_healthy(
    client: httpx.Client, store: SQLAlchemyStore, sleep_type: TaskType
) -> None:
    deep: object = 1
    for _ in range(300):
        deep = {"x": deep}
    answer = client.post("/tasks", json={"tasks": [{"type": "sleep", "kwargs": {"d": deep}}]})
    assert answer.status_code == 422, answer.text
    assert only_error(answer)[0][-1] == "kwargs"
    for kind in ("cron", "periodic", "oneshot", "adaptive"):
        answer = client.post("/tasks", json={"tasks": [{"type": "sleep", "kind": kind}]})
        assert answer.status_code in (201, 422), (kind, answer.text)
    assert client.get("/tasks").status_code == 200


def test_the_documentation_needs_nothing_from_outside(anonymous: httpx.Client) -> None:
    """/docs and /redoc load their scripts and styles from the server itself
    (a host with no way out still shows them), as does the console (its
    login page, open to all); / leads to the console."""
    root = anonymous.get("/", follow_redirects=False)
    assert root.status_code == 303 and root.headers["location"] == "/console/"
    for page in ("/docs", "/redoc", "/console/login"):
        html = anonymous.get(page).text
        sources = re.findall(r'(?:src|href)="([^"#][^"]*)"', html)
        assert sources, html
        for source in sources:
            assert source.startswith("/"), f"{page} loads {source} from elsewhere"
            # the console's own pages lead an anonymous reader to its login
            assert anonymous.get(source).status_code in (200, 303), source


def test_metrics_show_the_origins_as_last_counted(
    client: httpx.Client, store: SQLAlchemyStore, clock: Clock
) -> None:
    from swh_like_scheduler.visits.model import ListedOrigin

    assert "swh_scheduler_origins" not in client.get("/metrics").text  # never counted
    store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
    lister = store.get_or_create_lister("gitlab", "framagit", now=clock.now)
    store.record_listed_origins(
        [ListedOrigin(str(lister.id), f"https://framagit.org/p{n}", "git") for n in range(3)],
        now=clock.now,
    )
    store.update_metrics(now=clock.now)
    clock.now += timedelta(minutes=5)
    lines = client.get("/metrics").text.splitlines()
    labels = 'instance="framagit",lister="gitlab",state="never_visited",visit_type="git"'
    assert f"swh_scheduler_origins{{{labels}}} 3.0" in lines
    assert "swh_scheduler_origins_age_seconds 300.0" in lines
