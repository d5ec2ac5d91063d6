"""Issue 57: the overview said "Platform: ok" in green beside tasks in
ERROR (it meant that the runner and the workers were alive). It now says
"Runner and workers: alive" (or "in trouble", "not seen yet"), apart from
the tasks' conditions, and each type's trend chart carries its scale."""

from __future__ import annotations

import re
from datetime import timedelta

from api_server import READER, WRITER, Clock
from test_console import console_url, late_oneshots, logged_in
from waiting import wait_until

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.domain.records import WorkerSighting
from swh_like_scheduler.store import SQLAlchemyStore

__all__ = ["console_url"]  # the fixture, shared with the console's other tests


def section(page: str, css: str) -> str:
    """The markup of the overview's ``<section class="{css} ...">``."""
    found = re.search(rf'<section class="{css}\b.*?</section>', page, re.S)
    assert found, page
    return found.group(0)


def said(page: str) -> str:
    """What the health panel's heading says of the runner and workers."""
    found = re.search(
        r'<h2 id="health-title">([^<]*)<span data-live="health:status">([^<]*)<', page
    )
    assert found, page
    return found.group(1) + found.group(2)


def test_a_platform_never_seen_is_not_said_alive(console_url: str, sleep_type: TaskType) -> None:
    with logged_in(console_url, READER) as http:
        fresh = http.get("/console/").text
        assert "Platform" not in fresh
        assert said(fresh) == "Runner and workers: not seen yet"
        assert 'class="health unseen"' in fresh  # neither green nor red
        assert http.get("/console/live").json()["look"] == "unseen"


def test_the_runner_and_workers_are_said_apart_from_the_tasks_conditions(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, READER) as http, logged_in(console_url, WRITER) as writer:
        late_oneshots(writer, clock, 3)
        # a runner pass and a worker's heartbeat: the machinery is alive
        store.record_room("sleep", at=clock.now)
        store.record_worker_sightings([WorkerSighting("w1@node-a", clock.now, True)])
        wait_until(
            lambda: http.get("/console/live").json()["text"]["total:ERROR"] == "3",
            30,
            "the conditions counted",
        )
        page = http.get("/console/").text
        health = section(page, "health")
        assert said(page) == "Runner and workers: alive"
        assert 'class="health ok"' in health and "not whether the tasks are well" in health
        # the tasks' conditions are not in the health panel, but in their own
        assert "ERROR" not in health and "Tasks" not in health.replace("tasks", "")
        conditions = section(page, "conditions")
        assert "Tasks&#39; conditions" in conditions or "Tasks' conditions" in conditions
        assert '<span data-live="total:ERROR">3</span> ERROR' in conditions
        live = http.get("/console/live").json()
        assert live["text"]["health:status"] == "alive" and live["look"] == "ok"
        # ten minutes without a runner pass while the tasks are overdue: in trouble
        clock.now += timedelta(minutes=10)
        live = http.get("/console/live").json()
        assert live["text"]["health:status"] == "in trouble" and live["look"] == "degraded"
        assert "no runner has claimed a task" in live["html"]["health:reasons"]
        assert said(http.get("/console/").text) == "Runner and workers: in trouble"


def test_the_state_of_a_type_says_not_paused_rather_than_dispatching(
    console_url: str, sleep_type: TaskType
) -> None:
    """A type not paused said "dispatching", with no runner running."""
    with logged_in(console_url, READER) as http:
        page = http.get("/console/").text
        row = re.search(r'<tr id="type-sleep">.*?</tr>', page, re.S)
        assert row, page
        assert ">not paused</span>" in row.group(0) and "dispatching<" not in row.group(0)
