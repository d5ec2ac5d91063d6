"""The last failure and the retry policy's next step, through the HTTP API's
explain and on the console's task page (the same explanation as ``task
explain``), against SQLite and PostgreSQL."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import httpx
from api_server import WRITER, Clock, serving

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app

ERROR = "ValueError: no such origin\n  (and a second line)"


def failed_once(store: SQLAlchemyStore, now: datetime) -> tuple[int, datetime]:
    """A task of a type with 2 retries whose one run failed; its id and the
    run's end."""
    store.create_task_type(
        TaskType(
            type="fetch",
            backend_name="fetch",
            default_interval=timedelta(days=1),
            num_retries=2,
            retry_delay=timedelta(minutes=10),
            retry_jitter=timedelta(0),
        )
    )

    [task] = store.create_tasks(
        [
            Task(
                type="fetch",
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(days=1),
                next_run=now,
                deadline=now + timedelta(days=1),
            )
        ],
        now=now,
    )
    [claimed] = store.claim_ready_tasks("fetch", now=now, limit=1)
    ended = now + timedelta(seconds=5)
    store.end_task_run(
        claimed.backend_id,
        status=RunStatus.FAILED,
        ended=ended,
        error=ERROR,
        apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
    )
    return task.id or 0, ended


def test_explain_and_the_task_page_say_why_and_what_next(
    client: httpx.Client, store: SQLAlchemyStore, clock: Clock, now: datetime
) -> None:
    task_id, ended = failed_once(store, now)
    retry_at = ended + timedelta(minutes=10)
    explained = client.get(f"/tasks/{task_id}/explain", params={"at": ended.isoformat()}).json()
    assert explained["last_failure"]["error"] == ERROR
    assert explained["last_failure"]["status"] == "failed"
    assert explained["retry"]["state"] == "retrying"
    assert explained["retry"]["next_attempt"] == retry_at.isoformat()
    assert explained["condition"]["reason"] == "last_run_failed"
    assert explained["waits"] is None  # not due before its retry: not in line
    due = client.get(f"/tasks/{task_id}/explain", params={"at": retry_at.isoformat()}).json()
    assert due["ready"] and due["waits"]["ahead"] == 0 and due["waits"]["queued"] == 0
    assert due["waits"]["detail"].startswith("0 ready task(s) of its type come before it")
    settings = ApiSettings(tokens=parse_tokens(f"{WRITER}:rw"))
    with (
        serving(create_app(store, settings, clock=clock)) as url,
        httpx.Client(base_url=url, headers={"Accept": "text/html"}) as http,
    ):
        assert http.post("/console/login", data={"token": WRITER}).status_code == 303
        page = http.get(f"/console/tasks/{task_id}")
        assert page.status_code == 200
        assert "<dt>Retries</dt>" in page.text
        assert "retry 1 of 2 after 1 consecutive failure" in page.text
