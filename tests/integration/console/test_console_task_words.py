"""Issue 57, item 5: the console's task page says what the command line
says: "Earliest start" and "Latest start" (it said "Can start by" and
"Should start by"), a run by its number with its Celery id beside (the runs
table showed "dbf6279e" alone); the API's schema describes next_run and
deadline with the same words."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from api_server import READER, WRITER, Clock, serving

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app


@pytest.fixture
def console_url(store: SQLAlchemyStore, clock: Clock) -> Iterator[str]:
    settings = ApiSettings(tokens=parse_tokens(f"{WRITER}:rw,{READER}:ro"), runs_every=0.1)
    with serving(create_app(store, settings, clock=clock)) as url:
        yield url


def test_the_task_page_names_the_start_times_and_runs_as_the_command_line(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    [task] = store.create_tasks(
        [
            Task(
                type="sleep",
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=clock.now - timedelta(minutes=5),
                deadline=clock.now - timedelta(minutes=5),
            )
        ],
        now=clock.now - timedelta(minutes=10),
    )
    [claimed] = store.claim_ready_tasks("sleep", now=clock.now, limit=1)
    store.end_task_run(claimed.backend_id, status=RunStatus.FAILED, ended=clock.now, error="x")
    [run] = store.get_task_runs(task.id or 0)
    with httpx.Client(base_url=console_url, timeout=30) as http:
        login = http.post("/console/login", data={"token": READER, "next": "/console/"})
        assert login.status_code == 303, login.text
        page = http.get(f"/console/tasks/{task.id}").text
        schema = http.get("/openapi.json").json()["components"]["schemas"]
    assert "<dt" in page and ">Earliest start</dt>" in page and ">Latest start</dt>" in page
    assert "Can start by" not in page and "Should start by" not in page
    # the runs table: the run's number first, the start of its Celery id beside
    cell = re.search(r'<td class="run">(.*?)</td>', page, re.S)
    assert cell is not None, page
    assert cell.group(1).startswith(f"{run.id} ")
    assert f">{claimed.backend_id[:8]}\u2026</code>" in cell.group(1)
    assert f'title="{claimed.backend_id}"' in cell.group(1)
    described = {
        name: field.get("description", "")
        for name, field in schema["TaskOut"]["properties"].items()
    }
    assert described["next_run"].startswith("The earliest start (can_start_by)")
    assert described["deadline"].startswith("The latest start (should_start_by)")
    assert "earliest start" in schema["TaskIn"]["properties"]["next_run"]["description"]
