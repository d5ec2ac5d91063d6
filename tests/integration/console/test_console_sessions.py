"""Console sessions that end: logout, "log out everywhere", the idle time,
token removal; and one-time login links. Tried as an attacker would: a
cookie copied before logout, a link used twice, late, at once from two
browsers, opened by a link preview, asked for without a token."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from api_server import READER, WRITER, Clock, serving
from test_console import browser, csrf_of, logged_in

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.console.session import COOKIE
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app

TOKENS = f"{WRITER}:rw,{READER}:ro"


@pytest.fixture
def console_url(store: SQLAlchemyStore, clock: Clock) -> Iterator[str]:
    settings = ApiSettings(tokens=parse_tokens(TOKENS), console_idle=600)
    with serving(create_app(store, settings, clock=clock)) as url:
        yield url


def copy_of(url: str, http: httpx.Client) -> httpx.Client:
    """Another browser holding a copy of ``http``'s session cookie."""
    other = browser(url)
    other.cookies.set(COOKIE, http.cookies[COOKIE], path="/console")
    return other


def reads(http: httpx.Client) -> bool:
    answer = http.get("/console/")
    assert answer.status_code in (200, 303), answer.text
    return answer.status_code == 200


def link_for(url: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{url}/console/links", headers=headers, timeout=30)


def test_a_cookie_copied_before_logout_is_worthless_after_it(console_url: str) -> None:
    with logged_in(console_url, WRITER) as http, copy_of(console_url, http) as thief:
        token = csrf_of(http)
        assert reads(thief)
        answer = http.post("/console/logout", data={"csrf": token})
        assert answer.status_code == 303 and "ended=one" in answer.headers["location"]
        assert not reads(thief)
        # nor can it act with the CSRF token it read before
        acted = thief.post("/console/types/sleep/pause", data={"csrf": token})
        assert acted.status_code == 401
        # the owner's browser is logged out as well, and may log in again
        assert not reads(http)
    with logged_in(console_url, WRITER) as again:
        assert reads(again)


def test_log_out_everywhere_ends_every_session_of_the_token_only(console_url: str) -> None:
    with (
        logged_in(console_url, WRITER) as laptop,
        logged_in(console_url, WRITER) as phone,
        logged_in(console_url, READER) as colleague,
    ):
        assert reads(laptop) and reads(phone) and reads(colleague)
        answer = laptop.post("/console/logout-everywhere", data={"csrf": csrf_of(laptop)})
        assert answer.status_code == 303 and "ended=all" in answer.headers["location"]
        assert not reads(laptop) and not reads(phone)
        assert reads(colleague)  # another token's session goes on
        page = laptop.get("/console/login?ended=all")
        assert "logged out everywhere" in page.text


def test_a_session_unused_for_the_idle_time_is_over(console_url: str, clock: Clock) -> None:
    start = clock.now
    with logged_in(console_url, READER) as http:
        clock.now = start + timedelta(seconds=590)
        assert reads(http)  # a use: the idle time starts again
        clock.now = start + timedelta(seconds=590 + 590)
        assert reads(http)
        # the page's own live updates are not a use
        clock.now = start + timedelta(seconds=590 + 590 + 300)
        assert http.get("/console/live").status_code == 200
        clock.now = start + timedelta(seconds=590 + 590 + 601)
        assert http.get("/console/live").status_code == 401
        assert not reads(http)


def test_logout_on_one_replica_ends_the_session_on_the_other(
    store: SQLAlchemyStore, clock: Clock
) -> None:
    settings = ApiSettings(tokens=parse_tokens(TOKENS))
    with (
        serving(create_app(store, settings, clock=clock)) as one,
        serving(create_app(store, settings, clock=clock)) as two,
        logged_in(one, WRITER) as http,
        copy_of(two, http) as elsewhere,
    ):
        assert reads(elsewhere)
        http.post("/console/logout", data={"csrf": csrf_of(http)})
        assert not reads(elsewhere)


def test_a_login_link_opens_one_session_with_its_tokens_access(console_url: str) -> None:
    made = link_for(console_url, READER)
    assert made.status_code == 201, made.text
    link = made.json()
    assert link["access"] == "read-only" and link["url"].startswith(console_url)
    assert READER not in link["url"] and WRITER not in link["url"]
    code = link["path"].rsplit("/", 1)[1]
    with browser(console_url) as http:
        # opening the page (a link preview, a prefetch) does not use it
        for _ in range(2):
            page = http.get(link["path"])
            assert page.status_code == 200 and f'value="{code}"' in page.text
        assert page.headers["referrer-policy"] == "same-origin"  # the code goes nowhere else
        used = http.post("/console/link", data={"code": code})
        assert used.status_code == 303 and used.headers["location"] == "/console/"
        overview = http.get("/console/")
        assert overview.status_code == 200 and "read-only" in overview.text
        # a read-only session may not act
        refused = http.post("/console/types/sleep/pause", data={"csrf": csrf_of(http)})
        assert refused.status_code == 403
    with browser(console_url) as late_comer:
        again = late_comer.post("/console/link", data={"code": code})
        assert again.status_code == 401 and "used, expired or unknown" in again.text
        assert late_comer.get("/console/").status_code == 303


def test_a_login_link_expires_and_needs_a_token(console_url: str, clock: Clock) -> None:
    assert link_for(console_url, None).status_code == 401
    assert link_for(console_url, "x" * 20).status_code == 401
    code = link_for(console_url, WRITER).json()["path"].rsplit("/", 1)[1]
    clock.now += timedelta(minutes=10, seconds=1)
    with browser(console_url) as http:
        assert http.post("/console/link", data={"code": code}).status_code == 401
        for forged in ("", "A" * 32, code[:-1], "x" * 5000):
            assert http.post("/console/link", data={"code": forged}).status_code in (401, 413)
        assert http.get("/console/").status_code == 303
    # a link for the writer's token gives a read-write session
    fresh = link_for(console_url, WRITER).json()["path"].rsplit("/", 1)[1]
    with browser(console_url) as http:
        assert http.post("/console/link", data={"code": fresh}).status_code == 303
        assert "read-write" in http.get("/console/").text


def race_for(console_url: str, code: str, browsers: int) -> list[int]:
    """The statuses of ``browsers`` posting one link's code at once."""
    statuses: list[int] = []
    barrier = threading.Barrier(browsers)

    def use() -> None:
        with browser(console_url) as http:
            barrier.wait()
            statuses.append(http.post("/console/link", data={"code": code}).status_code)

    threads = [threading.Thread(target=use) for _ in range(browsers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def test_two_browsers_using_one_link_at_once_get_one_session(console_url: str) -> None:
    for _ in range(5):
        code = link_for(console_url, WRITER).json()["path"].rsplit("/", 1)[1]
        assert sorted(race_for(console_url, code, 4)) == [303, 401, 401, 401]


def test_a_link_from_another_site_is_refused(console_url: str) -> None:
    code = link_for(console_url, WRITER).json()["path"].rsplit("/", 1)[1]
    with browser(console_url) as http:
        answer = http.post(
            "/console/link", data={"code": code}, headers={"Origin": "https://evil.example"}
        )
        assert answer.status_code == 403
        # refused before use: the link still works from the console itself
        assert http.post("/console/link", data={"code": code}).status_code == 303


def test_changed_tokens_end_the_links_made_before(store: SQLAlchemyStore, clock: Clock) -> None:
    with serving(create_app(store, ApiSettings(tokens=parse_tokens(TOKENS)), clock=clock)) as url:
        code = link_for(url, READER).json()["path"].rsplit("/", 1)[1]
    fewer = ApiSettings(tokens=parse_tokens(f"{WRITER}:rw,{READER}:ro,{'z' * 20}:ro"))
    with serving(create_app(store, fewer, clock=clock)) as url, browser(url) as http:
        # the tokens changed: the signing key too, so the link names no token
        assert http.post("/console/link", data={"code": code}).status_code == 401
