"""The console's sessions and login links in the store (ConsoleStore): on
SQLite, PostgreSQL and through the Redis index's wrapper; a remote store
keeps none (its console fails closed)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.store.role_console import ConsoleStore


@pytest.fixture
def sessions(store: Any) -> ConsoleStore:
    if not isinstance(store, ConsoleStore):
        pytest.skip("a remote store keeps no console sessions (checked below)")
    return store


def test_a_remote_store_keeps_no_console_sessions(store: Any) -> None:
    remote = type(store).__name__ == "RemoteStore"
    assert isinstance(store, ConsoleStore) is not remote


def test_a_session_is_open_until_ended_or_idle(sessions: ConsoleStore, now: datetime) -> None:
    old = now - timedelta(days=2)
    sessions.open_console_session("s1", "tok-a", now=now, forget_before=old)
    sessions.open_console_session("s2", "tok-a", now=now, forget_before=old)
    sessions.open_console_session("s3", "tok-b", now=now, forget_before=old)
    idle = now - timedelta(minutes=60)
    assert sessions.touch_console_session("s1", now=now, idle_after=idle) == "tok-a"
    assert sessions.touch_console_session("nope", now=now, idle_after=idle) is None
    # a use moves the idle time on (written once a minute at most)
    later = now + timedelta(minutes=50)
    assert sessions.touch_console_session("s1", now=later, idle_after=later - timedelta(60)) == (
        "tok-a"
    )
    much_later = now + timedelta(minutes=100)
    cut = much_later - timedelta(minutes=60)
    assert sessions.touch_console_session("s1", now=much_later, idle_after=cut) == "tok-a"
    assert sessions.touch_console_session("s2", now=much_later, idle_after=cut) is None
    # a look that is not a use does not move it
    at = much_later + timedelta(minutes=30)
    unused = at - timedelta(minutes=60)
    assert sessions.touch_console_session("s3", now=at, idle_after=unused, seen=False) is None
    assert sessions.touch_console_session("s1", now=at, idle_after=unused, seen=False) == "tok-a"
    assert sessions.end_console_sessions(now=at, session_id="s1") == 1
    assert sessions.end_console_sessions(now=at, session_id="s1") == 0  # ended already
    assert sessions.touch_console_session("s1", now=at, idle_after=unused) is None


def test_ending_a_token_ends_its_sessions_only(sessions: ConsoleStore, now: datetime) -> None:
    old = now - timedelta(days=2)
    for name, token in (("a1", "tok-a"), ("a2", "tok-a"), ("b1", "tok-b")):
        sessions.open_console_session(name, token, now=now, forget_before=old)
    assert sessions.end_console_sessions(now=now, token="tok-a") == 2
    idle = now - timedelta(hours=1)
    assert [sessions.touch_console_session(n, now=now, idle_after=idle) for n in ("a1", "a2")] == [
        None,
        None,
    ]
    assert sessions.touch_console_session("b1", now=now, idle_after=idle) == "tok-b"
    with pytest.raises(InvalidInput, match="session_id"):
        sessions.end_console_sessions(now=now)
    with pytest.raises(InvalidInput, match="has no time zone"):
        sessions.end_console_sessions(now=now.replace(tzinfo=None), token="tok-b")


def test_old_sessions_and_links_are_forgotten(sessions: ConsoleStore, now: datetime) -> None:
    long_ago = now - timedelta(days=3)
    sessions.open_console_session("old", "t", now=long_ago, forget_before=long_ago)
    sessions.create_console_link("old-link", "t", now=long_ago, expires_at=long_ago)
    sessions.open_console_session("new", "t", now=now, forget_before=now - timedelta(days=1))
    ever = now - timedelta(days=30)
    assert sessions.touch_console_session("old", now=now, idle_after=ever) is None
    assert sessions.touch_console_session("new", now=now, idle_after=ever) == "t"
    # forgotten, so the same id can be given again without a conflict
    sessions.create_console_link("old-link", "t", now=now, expires_at=now + timedelta(minutes=1))


def test_a_link_is_used_once_before_it_expires(sessions: ConsoleStore, now: datetime) -> None:
    until = now + timedelta(minutes=10)
    sessions.create_console_link("l1", "tok-a", now=now, expires_at=until)
    sessions.create_console_link("l2", "tok-b", now=now, expires_at=until)
    assert sessions.use_console_link("l1", now=now) == "tok-a"
    assert sessions.use_console_link("l1", now=now) is None
    assert sessions.use_console_link("unknown", now=now) is None
    assert sessions.use_console_link("l2", now=until) is None  # expired
    assert sessions.use_console_link("l2", now=until - timedelta(seconds=1)) == "tok-b"


def test_one_of_several_users_of_a_link_at_once_gets_it(
    sessions: ConsoleStore, now: datetime
) -> None:
    sessions.create_console_link("race", "tok", now=now, expires_at=now + timedelta(minutes=5))
    got: list[str | None] = []
    barrier = threading.Barrier(4)

    def use() -> None:
        barrier.wait()
        got.append(sessions.use_console_link("race", now=now))

    threads = [threading.Thread(target=use) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got.count("tok") == 1 and got.count(None) == 3, got
