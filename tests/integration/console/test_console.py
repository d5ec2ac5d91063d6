"""The console's pages over a real server and store, used as a browser
would (forms, a cookie) and as an attacker would (no session, a read-only
session, no CSRF token, another origin, forged and stale cookies)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import httpx
import pytest
from api_server import READER, WRITER, Clock, serving
from waiting import wait_until

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.domain.model import RunStatus, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app

#: the dash of a range (1-50 of 60)
DASH = "\u2013"
CSRF = re.compile(r'name="csrf" value="([^"]*)"')


@pytest.fixture
def console_url(store: SQLAlchemyStore, clock: Clock) -> Iterator[str]:
    settings = ApiSettings(tokens=parse_tokens(f"{WRITER}:rw,{READER}:ro"), runs_every=0.1)
    with serving(create_app(store, settings, clock=clock)) as url:
        yield url


def browser(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30, headers={"Accept": "text/html"})


@contextmanager
def logged_in(url: str, token: str) -> Iterator[httpx.Client]:
    with browser(url) as http:
        answer = http.post("/console/login", data={"token": token, "next": "/console/"})
        assert answer.status_code == 303, answer.text
        yield http


def csrf_of(http: httpx.Client, path: str = "/console/") -> str:
    page = http.get(path)
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found and found.group(1)
    return found.group(1)


def late_oneshots(http: httpx.Client, clock: Clock, count: int, *, base: int = 0) -> list[int]:
    """One-shot tasks whose instants passed ``i`` minutes ago (ERROR: late)."""
    tasks = [
        {
            "type": "sleep",
            "args": [base + i],
            "kind": "oneshot",
            "next_run": (clock.now - timedelta(minutes=i + 1)).isoformat(),
            "key": f"reminder-{base + i}",
        }
        for i in range(count)
    ]
    answer = http.post(
        "/tasks", json={"tasks": tasks}, headers={"Authorization": f"Bearer {WRITER}"}
    )
    assert answer.status_code == 201, answer.text
    return [t["id"] for t in answer.json()["tasks"]]


def counted(http: httpx.Client, text: str) -> None:
    wait_until(lambda: text in http.get("/console/problems").text, 30, f"{text!r} on the page")


def test_without_a_session_pages_lead_to_the_login(console_url: str) -> None:
    with browser(console_url) as http:
        root = http.get("/")
        assert root.status_code == 303 and root.headers["location"] == "/console/"
        for path in ("/console/", "/console/problems", "/console/tasks/1", "/console/bulk"):
            answer = http.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/console/login?next=")
        assert http.get("/console/live").status_code == 401
        # the API itself still wants its bearer token
        assert http.get("/tasks").status_code == 401
        wrong = http.post("/console/login", data={"token": "not-a-token-at-all-0000"})
        assert wrong.status_code == 401 and "No such token" in wrong.text
        assert "swh_console" not in wrong.headers.get("set-cookie", "")


def test_a_read_only_session_sees_everything_but_acts_on_nothing(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, WRITER) as writer:
        (task_id,) = late_oneshots(writer, clock, 1)
    with logged_in(console_url, READER) as http:
        overview = http.get("/console/")
        assert overview.status_code == 200 and "read-only" in overview.text
        # every action button is shown disabled
        assert re.search(r'<button type="submit" disabled[^>]*>Pause</button>', overview.text)
        page = http.get(f"/console/tasks/{task_id}")
        assert "Actions need a session of a read-write token" in page.text
        token = csrf_of(http, f"/console/tasks/{task_id}")
        refused = http.post(f"/console/tasks/{task_id}/disable", data={"csrf": token})
        assert refused.status_code == 403 and "may only read" in refused.text
        refused = http.post("/console/types/sleep/pause", data={"csrf": token})
        assert refused.status_code == 403
    assert store.get_tasks([task_id])[0].status is TaskStatus.WAITING


def test_cookie_and_headers(console_url: str) -> None:
    with browser(console_url) as http:
        answer = http.post("/console/login", data={"token": WRITER})
        cookie = answer.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/console" in cookie
        assert "secure" not in cookie  # plain http on loopback; set over https
        assert WRITER.lower() not in cookie  # the secret never leaves the form
        page = http.get("/console/")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["cache-control"] == "no-store"
        # only console paths of this site after a login
        sent = http.post("/console/login", data={"token": WRITER, "next": "https://evil.example/"})
        assert sent.headers["location"] == "/console/"
        sent = http.post("/console/login", data={"token": WRITER, "next": "//evil.example/x"})
        assert sent.headers["location"] == "/console/"


def test_actions_need_the_csrf_token_and_this_origin(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, WRITER) as http, logged_in(console_url, WRITER) as other:
        (task_id,) = late_oneshots(http, clock, 1)
        path = f"/console/tasks/{task_id}/disable"
        assert http.post(path).status_code == 403  # no token
        assert http.post(path, data={"csrf": "x" * 43}).status_code == 403
        # another session's token is not this session's
        assert http.post(path, data={"csrf": csrf_of(other)}).status_code == 403
        token = csrf_of(http)
        evil = {"Origin": "https://evil.example"}
        assert http.post(path, data={"csrf": token}, headers=evil).status_code == 403
        assert store.get_tasks([task_id])[0].status is TaskStatus.WAITING
        done = http.post(path, data={"csrf": token}, headers={"Origin": console_url})
        assert done.status_code == 303
        assert done.headers["location"].startswith(f"/console/tasks/{task_id}?did=disable")
        assert store.get_tasks([task_id])[0].status is TaskStatus.DISABLED
        page = http.get(done.headers["location"])
        assert f"Task {task_id} was disabled." in page.text
        again = http.post(path, data={"csrf": token})
        said = http.get(again.headers["location"]).text
        assert f"Task {task_id}: unchanged: the task is already disabled" in said
        assert http.post(f"/console/tasks/{task_id}/enable", data={"csrf": token}).is_redirect
        assert store.get_tasks([task_id])[0].status is TaskStatus.WAITING
        huge = http.post(f"/console/tasks/{2**64}/disable", data={"csrf": token})
        assert huge.status_code == 404
        respawned = http.post(
            f"/console/tasks/{task_id}/respawn", data={"csrf": token, "at": "2030-01-01T10:00"}
        )
        assert respawned.is_redirect
        assert store.get_tasks([task_id])[0].next_run.isoformat() == "2030-01-01T10:00:00+00:00"
        bad = http.post(f"/console/tasks/{task_id}/respawn", data={"csrf": token, "at": "soon"})
        assert bad.status_code == 422 and "at:" in bad.text
        # a deletion needs its box ticked
        unticked = http.post(f"/console/tasks/{task_id}/delete", data={"csrf": token})
        assert unticked.status_code == 400
        gone = http.post(f"/console/tasks/{task_id}/delete", data={"csrf": token, "confirm": "yes"})
        assert gone.is_redirect and store.get_tasks([task_id]) == []
        # logging out needs the token too, then the session is gone
        assert http.post("/console/logout").status_code == 403
        assert http.post("/console/logout", data={"csrf": token}).is_redirect
        assert http.get("/console/").status_code == 303


def test_forged_expired_and_revoked_sessions_are_refused(
    store: SQLAlchemyStore, clock: Clock
) -> None:
    from swh_like_scheduler.console.session import COOKIE, Sessions

    tokens = parse_tokens(f"{WRITER}:rw,{READER}:ro")
    sessions = Sessions(tokens, lifetime=3600)
    opened = sessions.open(READER, now=1000.0)
    assert opened is not None
    cookie, session = opened
    assert sessions.check(cookie, now=1000.0 + 3599) == session
    assert sessions.check(cookie, now=1000.0 + 3601) is None  # expired
    body, mac = cookie.split(".")
    assert sessions.check(f"{body}.{mac[:-2]}AA", now=1000.0) is None  # forged
    forged_body = body[:-2] + ("AA" if body[-2:] != "AA" else "BB")
    assert sessions.check(f"{forged_body}.{mac}", now=1000.0) is None
    # the reader's token removed: its sessions end; the writer's go on
    assert Sessions(parse_tokens(f"{WRITER}:rw,{READER}:ro")).check(cookie, now=1000.0)
    assert Sessions(parse_tokens(f"{WRITER}:rw")).check(cookie, now=1000.0) is None
    # a session can never be more than its token
    assert session.access.name == "READ"
    # over a server whose tokens changed, the old cookie leads to the login
    settings = ApiSettings(tokens=parse_tokens(f"{'n' * 20}:rw"))
    with serving(create_app(store, settings, clock=clock)) as url, browser(url) as http:
        http.cookies.set(COOKIE, cookie, path="/console")
        assert http.get("/console/").status_code == 303


def test_problems_are_worst_first_filtered_and_paged(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, READER) as http, logged_in(console_url, WRITER) as writer:
        ids = late_oneshots(writer, clock, 60)
        counted(http, f"1{DASH}50 of 60")
        page = http.get("/console/problems").text
        shown = [int(i) for i in re.findall(r'<a href="/console/tasks/(\d+)">', page)]
        # the latest first: the one-shot due 60 min ago, then 59 min...
        assert shown == list(reversed(ids))[:50]
        assert f"51{DASH}60 of 60" in http.get("/console/problems", params={"page": 2}).text
        # filters: free text on the key, kind, level
        assert f"1{DASH}1 of 1" in http.get("/console/problems", params={"q": "REMINDER-7"}).text
        assert "0 of 0" in http.get("/console/problems", params={"kind": "cron"}).text
        assert "0 of 0" in http.get("/console/problems", params={"level": "WARNING"}).text
        # a page number out of range shows the last page
        assert f"51{DASH}60 of 60" in http.get("/console/problems", params={"page": 99}).text
        assert http.get("/console/problems", params={"page": "x" * 500}).status_code == 200


def test_bulk_acts_on_the_selection_it_confirmed(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, WRITER) as http:
        ids = late_oneshots(http, clock, 30)
        counted(http, f"1{DASH}30 of 30")
        wanted = {"action": "disable", "q": "reminder-1", "level": "ERROR"}
        confirm = http.get("/console/bulk", params=wanted)
        assert "Disable 11 tasks?" in confirm.text  # reminder-1 and reminder-10..19
        fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', confirm.text))
        assert fields["expected"] == "11"
        # a selection that grew since it was confirmed is confirmed again
        fewer = {**fields, "expected": "10"}
        again = http.post("/console/bulk", data=fewer)
        assert again.status_code == 409 and "confirm the new selection" in again.text
        assert "11 tasks match now, more than the 10 you confirmed" in again.text
        # two of them are disabled in between, by hand (WARNING: an operator
        # stopped them), with no recount: left alone, and said why
        by_key = {t.key: t.id for t in store.get_tasks(ids)}
        store.disable_tasks([by_key["reminder-12"] or 0, by_key["reminder-15"] or 0], now=clock.now)
        done = http.post("/console/bulk", data=fields)
        assert done.status_code == 303
        said = http.get(done.headers["location"]).text
        assert "Disabled: 9 of 11 tasks changed." in said
        assert "Left alone: 2 are no longer in ERROR (checked as they were written)." in said
        tasks = store.get_tasks(ids)
        disabled = sorted(t.key or "" for t in tasks if t.status is TaskStatus.DISABLED)
        assert disabled == ["reminder-1", *(f"reminder-{n}" for n in range(10, 20))]
        assert http.get("/console/bulk", params={"action": "drop"}).status_code == 404


def test_a_recount_asked_in_the_console_shows_the_change_at_once(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, WRITER) as http:
        ids = late_oneshots(http, clock, 5)
        counted(http, f"1{DASH}5 of 5")
        store.disable_tasks(ids[:2], now=clock.now)  # behind the console's back
        page = http.get("/console/problems", params={"level": "ERROR"}).text
        fields = dict(re.findall(r'name="(csrf)" value="([^"]*)"', page))
        again = http.post("/console/recount", data={**fields, "level": "ERROR"})
        assert again.status_code == 303
        assert again.headers["location"].startswith("/console/problems?did=recount&done=1")
        shown = http.get(again.headers["location"]).text
        assert "Counted again." in shown
        # disabled by an operator: WARNING, no longer among the ERROR
        assert f"1{DASH}3 of 3" in shown
    with logged_in(console_url, READER) as reader:
        page = reader.get("/console/problems").text
        assert "Count again now" not in page
        refused = reader.post("/console/recount", data={"csrf": "x"})
        assert refused.status_code == 403


def test_the_task_page_shows_runs_with_their_errors(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, READER) as http, logged_in(console_url, WRITER) as writer:
        (task_id,) = late_oneshots(writer, clock, 1)
        (claimed,) = store.claim_ready_tasks("sleep", now=clock.now, limit=10)
        store.start_task_run(claimed.backend_id, started=clock.now, worker="w1@node-a")
        store.end_task_run(
            claimed.backend_id,
            status=RunStatus.FAILED,
            ended=clock.now + timedelta(seconds=3),
            error="TypeError(\"sleep() got an unexpected keyword argument 'n'\")",
        )
        page = http.get(f"/console/tasks/{task_id}").text
        assert "unexpected keyword argument &#39;n&#39;" in page
        assert "w1@node-a" in page and "failed" in page
        assert http.get("/console/tasks/999999").status_code == 404


def test_the_overview_counts_per_type_and_live(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, READER) as http, logged_in(console_url, WRITER) as writer:
        late_oneshots(writer, clock, 3)
        wait_until(
            lambda: http.get("/console/live").json()["text"]["sleep:ERROR"] == "3",
            30,
            "the live figures",
        )
        (claimed, *_) = store.claim_ready_tasks("sleep", now=clock.now, limit=10)
        store.end_task_run(claimed.backend_id, status=RunStatus.FAILED, ended=clock.now)
        wait_until(
            lambda: http.get("/console/live").json()["text"]["sleep:failures"] == "1",
            30,
            "the failure counted",
        )
        live = http.get("/console/live").json()
        assert live["text"]["sleep:queued"] == "2 / 1,000"  # its max_queue_length
        assert live["text"]["sleep:hour"] == "3 / 1 in 1 h"  # dispatched, ended
        assert live["status"] in ("ok", "degraded")
        assert "sleep" in http.get("/console/").text


def test_a_console_form_is_small(console_url: str) -> None:
    with browser(console_url) as http:
        answer = http.post("/console/login", content=b"token=" + b"a" * 100_000)
        assert answer.status_code == 413


def test_a_type_is_paused_and_resumed_from_the_overview(
    console_url: str, store: SQLAlchemyStore, sleep_type: TaskType, clock: Clock
) -> None:
    with logged_in(console_url, WRITER) as http:
        token = csrf_of(http)
        done = http.post("/console/types/sleep/pause", data={"csrf": token})
        assert done.status_code == 303
        paused = store.get_task_type("sleep")
        assert paused is not None and paused.paused_at == clock.now
        page = http.get(done.headers["location"]).text
        assert "Task type sleep is paused." in page and ">Resume</button>" in page
        assert http.post("/console/types/sleep/resume", data={"csrf": token}).is_redirect
        resumed = store.get_task_type("sleep")
        assert resumed is not None and resumed.paused_at is None
        assert http.post("/console/types/nope/pause", data={"csrf": token}).status_code == 404
        assert http.post("/console/types/sleep/drop", data={"csrf": token}).status_code == 404


def test_a_link_cannot_put_its_own_words_on_a_page(console_url: str) -> None:
    with logged_in(console_url, READER) as http:
        page = http.get("/console/", params={"did": "disable", "what": "Your account is locked"})
        assert "Your account is locked" not in page.text
        assert "It was disabled." in page.text
        page = http.get("/console/", params={"did": "<script>", "what": "Task 1"}).text
        assert "<script>" not in page.replace('<script src="/console/static/console.js"', "")


def test_the_origins_page_shows_the_coverage_as_counted(
    console_url: str, store: SQLAlchemyStore, clock: Clock
) -> None:
    from swh_like_scheduler.visits.feedback import VisitStatusMessage
    from swh_like_scheduler.visits.model import ListedOrigin, VisitStatus

    with browser(console_url) as anonymous:
        assert anonymous.get("/console/origins").status_code == 303  # to the login
    with logged_in(console_url, READER) as http:
        assert "No origins counted yet" in http.get("/console/origins").text
        store.create_task_type(
            TaskType(type="load-git", backend_name="loader.git", max_queue_length=500)
        )
        lister = store.get_or_create_lister("gitlab", "framagit", now=clock.now)
        urls = [f"https://framagit.org/p{n}" for n in range(4)]
        store.record_listed_origins(
            [ListedOrigin(str(lister.id), u, "git") for u in urls], now=clock.now
        )
        store.record_visit_statuses(
            [VisitStatusMessage(urls[0], "git", clock.now, VisitStatus.FULL, "a" * 40)]
        )
        store.update_metrics(now=clock.now)
        clock.now += timedelta(minutes=3)
        page = http.get("/console/origins").text
    row = re.search(r"<td>gitlab</td>\s*<td>framagit</td>\s*<td>git</td>(.*?)</tr>", page, re.S)
    assert row, page
    cells = re.findall(r'<td class="num">(.*?)</td>', row.group(1), re.S)
    text = [re.sub(r"<[^>]+>", "", c).strip() for c in cells]
    # known, enabled, never visited, visited, pending, ERROR, WARNING, OK
    assert text == ["4", "4", "3", "25 %", "0", "0", "3", "1"]
    assert '<span class="level WARNING">3</span>' in row.group(1)
    assert "<td>load-git</td>" in page and ">500<" in page
