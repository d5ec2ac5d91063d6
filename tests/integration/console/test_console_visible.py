"""The console shows the invisible and reordering characters of what users
wrote (keys, descriptions, worker names, error texts) as escapes, never
raw, while the values its forms send back stay exact."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
from api_server import READER, WRITER, Clock
from test_console import DASH, console_url, counted, logged_in
from waiting import wait_until

from swh_like_scheduler.domain.model import RunStatus, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

__all__ = ["console_url"]  # the fixture, shared with the console's other tests

RLO = "\u202e"
#: shown raw, it reads "invoice-exe.png"
SPOOF = f"invoice-{RLO}gnp.exe"
ESCAPED = "invoice-\\u202egnp.exe"
ARABIC = "\u0645\u0631\u062d\u0628\u0627"


def late_task(http: httpx.Client, clock: Clock, key: str, minutes: int) -> int:
    """A one-shot task of key ``key`` due ``minutes`` ago (ERROR: late)."""
    task = {
        "type": "sleep",
        "args": [minutes],
        "kind": "oneshot",
        "next_run": (clock.now - timedelta(minutes=minutes)).isoformat(),
        "key": key,
    }
    answer = http.post(
        "/tasks", json={"tasks": [task]}, headers={"Authorization": f"Bearer {WRITER}"}
    )
    assert answer.status_code == 201, answer.text
    task_id: int = answer.json()["tasks"][0]["id"]
    return task_id


def outside_fields(page: str) -> str:
    """The page less the values of its form fields."""
    return re.sub(r'value="[^"]*"', 'value=""', page)


def test_a_key_behind_a_right_to_left_override_shows_the_override(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, READER) as http, logged_in(console_url, WRITER) as writer:
        spoof_id = late_task(writer, clock, SPOOF, 2)
        arabic_id = late_task(writer, clock, ARABIC, 1)
        (claimed,) = store.claim_ready_tasks("sleep", now=clock.now, limit=1, among=[spoof_id])
        store.start_task_run(claimed.backend_id, started=clock.now, worker="w1\u200b@node-a")
        store.end_task_run(
            claimed.backend_id,
            status=RunStatus.FAILED,
            ended=clock.now + timedelta(seconds=3),
            error="Traceback (most recent call last):\n  File x\nValueError: \x1b[2Jbad " + RLO,
        )

        page = http.get(f"/console/tasks/{spoof_id}").text
        assert f"<code>{ESCAPED}</code>" in page
        assert "w1\\u200b@node-a" in page
        # the error keeps its lines; its controls show as escapes
        assert "File x\nValueError: \\x1b[2Jbad \\u202e</pre>" in page
        assert RLO not in page and "\u200b" not in page and "\x1b" not in page

        # the problem list shows the key escaped, an Arabic key as it is
        counted(http, f"1{DASH}2 of 2")
        problems = http.get("/console/problems").text
        assert f'<div class="sub key">{ESCAPED}</div>' in problems
        assert f'<div class="sub key">{ARABIC}</div>' in problems
        assert RLO not in problems
        assert ARABIC in http.get(f"/console/tasks/{arabic_id}").text


def test_a_search_for_such_a_key_is_refilled_and_acted_on_exactly(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, WRITER) as http:
        spoof_id = late_task(http, clock, SPOOF, 2)
        plain_id = late_task(http, clock, "invoice-gnp.exe", 1)  # less the override
        counted(http, f"1{DASH}2 of 2")
        found = http.get("/console/problems", params={"q": f"{RLO}gnp"}).text
        assert f"1{DASH}1 of 1" in found and f'href="/console/tasks/{spoof_id}"' in found
        # the search box holds what was searched: submitting it again finds the same
        assert f'name="q" value="{RLO}gnp"' in found
        assert RLO not in outside_fields(found)

        # the bulk form sends the same filter back: it disables that task only
        confirm = http.get("/console/bulk", params={"action": "disable", "q": f"{RLO}gnp"})
        assert "Disable 1 tasks?" in confirm.text
        assert "\\u202egnp" in outside_fields(confirm.text)  # the filter, described
        fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', confirm.text))
        assert fields["q"] == f"{RLO}gnp"
        done = http.post("/console/bulk", data=fields)
        assert done.status_code == 303, done.text
        statuses = {t.key: t.status for t in store.get_tasks([spoof_id, plain_id])}
        assert statuses == {SPOOF: TaskStatus.DISABLED, "invoice-gnp.exe": TaskStatus.WAITING}


def test_a_type_description_shows_its_escapes_on_the_overview(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType
) -> None:
    store.update_task_type("sleep", description=f"sleep {RLO}a while")
    with logged_in(console_url, READER) as http:
        wait_until(
            lambda: "sleep \\u202ea while" in http.get("/console/").text, 30, "the description"
        )
        assert RLO not in http.get("/console/").text
