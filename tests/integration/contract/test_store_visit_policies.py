"""The visit policies in the store (SQLite, PostgreSQL, indexed, remote):
what each picks and in which order, the cooldowns, ties by url, the queue
of origins without a forge date, and grabs at once that never send an
origin twice."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.visits.feedback import VisitStatusMessage
from swh_like_scheduler.visits.model import ListedOrigin
from swh_like_scheduler.visits.policy import Cooldowns, VisitPolicy

H = timedelta(hours=1)
D = timedelta(days=1)


@pytest.fixture
def lister(store: Any, now: datetime) -> str:
    store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
    return str(store.get_or_create_lister("gitlab", now=now - 100 * D).id)


def url(name: str) -> str:
    return f"https://forge.example/{name}"


def record(store: Any, lister: str, at: datetime, **updates: datetime | None) -> None:
    """One origin per keyword: its name and its forge date."""
    store.record_listed_origins(
        [ListedOrigin(lister, url(n), "git", last_update=u) for n, u in updates.items()], now=at
    )


def visit(store: Any, name: str, at: datetime, status: str, snapshot: str | None = None) -> None:
    message = VisitStatusMessage(url(name), "git", at, status, snapshot)  # type: ignore[arg-type]
    assert store.record_visit_statuses([message])[0] == 1


def names(origins: list[ListedOrigin]) -> list[str]:
    return [o.url.rsplit("/", 1)[1] for o in origins]


def peek(store: Any, policy: VisitPolicy, now: datetime, count: int = 10, **kw: Any) -> list[str]:
    return names(store.peek_next_visits("git", count, policy, now=now, **kw))


def test_never_visited_oldest_update_first(store: Any, lister: str, now: datetime) -> None:
    record(store, lister, now - 50 * D, b=now - 3 * D, a=now - 3 * D, c=now - 9 * D, d=None)
    visit(store, "e", now - 20 * D, "full", "1" * 40)
    record(store, lister, now - 50 * D, e=now - 30 * D)  # visited: not for this policy
    # ties (a, b) by url; no forge date (d): not for this policy
    assert peek(store, VisitPolicy.NEVER_VISITED_OLDEST_UPDATE_FIRST, now) == ["c", "a", "b"]


def test_already_visited_by_lag_takes_pending_changes_largest_lag_first(
    store: Any, lister: str, now: datetime
) -> None:
    record(store, lister, now - 50 * D, a=now - D, b=now - D, c=now - 40 * D, d=None)
    visit(store, "a", now - 10 * D, "full", "1" * 40)  # changed 9 days after its visit
    visit(store, "b", now - 3 * D, "full", "2" * 40)  # 2 days after
    visit(store, "c", now - 20 * D, "full", "3" * 40)  # visited after its change
    assert peek(store, VisitPolicy.ALREADY_VISITED_ORDER_BY_LAG, now) == ["a", "b"]


def test_oldest_scheduled_first_never_scheduled_leading(
    store: Any, lister: str, now: datetime
) -> None:
    record(store, lister, now - 50 * D, a=None, b=None, c=None)
    no_cooldown = Cooldowns(scheduled=0, no_result=0)  # type: ignore[arg-type]
    grab = store.grab_next_visits
    assert names(grab("git", 1, "oldest_scheduled_first", now=now - 5 * D)) == ["a"]
    assert names(grab("git", 1, "oldest_scheduled_first", now=now - 4 * D)) == ["b"]
    order = peek(store, VisitPolicy.OLDEST_SCHEDULED_FIRST, now, cooldowns=no_cooldown)
    assert order == ["c", "a", "b"]


def test_the_cooldowns(store: Any, lister: str, now: datetime) -> None:
    record(store, lister, now - 100 * D, **{n: None for n in "abcdefg"})
    store.grab_next_visits("git", 2, "oldest_scheduled_first", now=now - 6 * H)  # a, b
    visit(store, "b", now - 5 * H, "full", "1" * 40)
    store.grab_next_visits("git", 1, "oldest_scheduled_first", now=now - 8 * D)  # c, no result
    visit(store, "d", now - 13 * D, "failed")
    visit(store, "e", now - 15 * D, "failed")
    visit(store, "f", now - 30 * D, "not_found")
    visit(store, "g", now - 32 * D, "not_found")
    # a: sent 6 h ago (12 h cooldown); b: sent and visited 6 h ago; c: sent 8
    # days ago and no status yet (7 d): due again; d: failed 13 days ago
    # (14 d); e: 15; f: not found 30 days ago (31 d); g: 32
    assert sorted(peek(store, VisitPolicy.OLDEST_SCHEDULED_FIRST, now)) == ["c", "e", "g"]
    shorter = Cooldowns(scheduled=timedelta(hours=5), failed=10 * D, not_found=D)
    # a still waits for its status (sent 6 h ago, 7 d without a result)
    assert sorted(peek(store, VisitPolicy.OLDEST_SCHEDULED_FIRST, now, cooldowns=shorter)) == [
        "b",
        "c",
        "d",
        "e",
        "f",
        "g",
    ]


def test_origins_without_last_update_follow_the_queue_and_move_it(
    store: Any, lister: str, now: datetime
) -> None:
    record(store, lister, now - 100 * D, a=None, b=None, c=None, d=None, dated=now)
    visit(store, "a", now - 40 * D, "full", "1" * 40)  # eventful: offset 2, +4 h
    visit(store, "b", now - 40 * D, "full", "2" * 40)
    visit(store, "b", now - 39 * D, "full", "2" * 40)  # uneventful: offset 3, +8 h
    order = peek(store, VisitPolicy.ORIGINS_WITHOUT_LAST_UPDATE, now)
    assert order == ["c", "d", "a", "b"]  # never visited first, then by position
    taken = store.grab_next_visits("git", 3, "origins_without_last_update", now=now)
    assert names(taken) == ["c", "d", "a"]
    # the queue moved to a's position: b's next visit counts from there
    visit(store, "b", now - 38 * D, "failed")
    [b] = store.origin_visit_stats_get([(url("b"), "git")])
    assert b.next_visit_queue_position == now - 40 * D + 4 * H + 8 * H


def test_stop_after_success(store: Any, lister: str, now: datetime) -> None:
    record(store, lister, now - 100 * D, a=None, b=now, c=None)
    visit(store, "a", now - 40 * D, "full", "1" * 40)
    visit(store, "c", now - 40 * D, "failed")
    assert peek(store, VisitPolicy.STOP_AFTER_SUCCESS, now) == ["b", "c"]


def test_first_visits_after_listing(store: Any, lister: str, now: datetime) -> None:
    record(store, lister, now - 10 * D, old=now - 20 * D, new=now - D, undated=None)
    store.grab_next_visits("git", 10, "oldest_scheduled_first", now=now - 5 * D)
    first = VisitPolicy.FIRST_VISITS_AFTER_LISTING
    assert peek(store, first, now, lister_id=lister) == []  # scheduled since no listing
    [row] = [x for x in store.get_listers() if x.id == lister]
    finished = row.__class__(**{**vars(row), "last_listing_finished_at": now - 2 * D})
    store.update_lister(finished, now=now - 2 * D)
    relaxed = Cooldowns(scheduled=D, no_result=D)
    assert peek(store, first, now, lister_id=lister, cooldowns=relaxed) == ["old", "new", "undated"]
    # in this lister's order: its own forge dates, whatever another lister says
    other = str(store.get_or_create_lister("gitea", now=now).id)
    record(store, other, now - 2 * D, old=now, undated=now - 30 * D)
    assert peek(store, first, now, lister_id=lister, cooldowns=relaxed) == ["old", "new", "undated"]
    with pytest.raises(InvalidInput) as refused:
        peek(store, first, now)
    assert refused.value.field == "lister_id"


def test_deadline_takes_due_origins_most_overdue_first(
    store: Any, lister: str, now: datetime
) -> None:
    record(store, lister, now - 30 * D, never=None, fresh=None, stale=None, changed=None)
    visit(store, "fresh", now - 2 * H, "full", "1" * 40)  # due in 2 h
    visit(store, "stale", now - 10 * D, "full", "2" * 40)  # due 9.8 days ago
    visit(store, "changed", now - 3 * H, "full", "3" * 40)  # due in 1 h, but:
    record(store, lister, now - 30 * D, changed=now - H)  # the forge says it changed
    # never visited: due since first seen (30 days ago)
    assert peek(store, VisitPolicy.DEADLINE, now) == ["never", "stale", "changed"]


def test_grabbing_marks_scheduled_and_peeking_does_not(
    store: Any, lister: str, now: datetime
) -> None:
    record(store, lister, now - D, a=None, b=None)
    assert peek(store, VisitPolicy.OLDEST_SCHEDULED_FIRST, now) == ["a", "b"]
    assert peek(store, VisitPolicy.OLDEST_SCHEDULED_FIRST, now) == ["a", "b"]
    assert names(store.grab_next_visits("git", 5, "oldest_scheduled_first", now=now)) == ["a", "b"]
    assert store.grab_next_visits("git", 5, "oldest_scheduled_first", now=now) == []
    stats = store.origin_visit_stats_get([(url("a"), "git")])
    assert stats[0].last_scheduled == now and stats[0].last_visit is None


def test_disabled_origins_and_other_listers(store: Any, lister: str, now: datetime) -> None:
    other = str(store.get_or_create_lister("gitea", now=now).id)
    store.record_listed_origins(
        [
            ListedOrigin(lister, url("off"), "git", enabled=False),
            ListedOrigin(other, url("theirs"), "git"),
            ListedOrigin(lister, url("both"), "git"),
            ListedOrigin(other, url("both"), "git"),
        ],
        now=now,
    )
    assert peek(store, VisitPolicy.OLDEST_SCHEDULED_FIRST, now) == ["both", "theirs"]
    assert peek(store, VisitPolicy.OLDEST_SCHEDULED_FIRST, now, lister_id=lister) == ["both"]
    everything = peek(store, VisitPolicy.OLDEST_SCHEDULED_FIRST, now, enabled=False)
    assert everything == ["both", "off", "theirs"]


def test_bad_arguments_are_refused_by_field(store: Any, lister: str, now: datetime) -> None:
    for kwargs, field in (
        ({"policy": "newest_first"}, "policy"),
        ({"count": -1}, "count"),
        ({"count": 10_001}, "count"),
        ({"visit_type": "g it"}, "visit_type"),
    ):
        arguments = {"visit_type": "git", "count": 1, "policy": "deadline", **kwargs}
        with pytest.raises(InvalidInput) as refused:
            store.grab_next_visits(**arguments, now=now)
        assert refused.value.field in (field, f"kwargs.{field}")


def test_grabs_at_once_never_send_an_origin_twice(store: Any, lister: str, now: datetime) -> None:
    record(store, lister, now - D, **{f"o{n:03d}": None for n in range(120)})

    def grab(_: int) -> list[str]:
        return names(store.grab_next_visits("git", 7, "oldest_scheduled_first", now=now))

    with ThreadPoolExecutor(4) as pool:
        taken = [n for batch in pool.map(grab, range(24)) for n in batch]
    assert len(taken) == len(set(taken)) == 120


def test_the_condition_counts_agree_with_the_condition_of_each_origin(
    store: Any, lister: str, now: datetime
) -> None:
    """A random world of 80 origins: ``update_metrics`` counts per level
    what ``visit_condition`` says of each (visits/condition.py)."""
    import random

    from swh_like_scheduler.policy.condition import Condition
    from swh_like_scheduler.visits.condition import visit_condition

    rng = random.Random(7)
    names = [f"o{n:02d}" for n in range(80)]
    first_seen = {n: now - rng.choice([H, 5 * H, 20 * H, 3 * D, 40 * D]) for n in names}
    for name in names:  # listed at various times, some with a forge date
        forge = rng.choice([None, now - rng.randrange(1, 2000) * H])
        record(store, lister, first_seen[name], **{name: forge})
    off = rng.sample(names, 5)
    store.record_listed_origins(
        [ListedOrigin(lister, url(n), "git", enabled=False) for n in off], now=now - 100 * D
    )
    for name in names:
        for _ in range(rng.randrange(0, 4)):  # a few visits each, of every outcome
            at = now - rng.randrange(1, 3000) * H
            status = rng.choice(["full", "full", "failed", "not_found"])
            snapshot = f"{rng.randrange(3):040x}" if status == "full" else None
            store.record_visit_statuses(
                [VisitStatusMessage(url(name), "git", at, status, snapshot)]  # type: ignore[arg-type]
            )
    origins = {o.url: o for o in store.get_listed_origins(enabled=None, limit=1000).origins}
    stats = {s.url: s for s in store.origin_visit_stats_get([(u, "git") for u in origins])}
    expected = {level: 0 for level in Condition}
    for address, origin in origins.items():
        found = visit_condition(origin, stats.get(address), now)
        if found is not None:
            expected[found.level] += 1
    [metrics] = store.update_metrics(now=now)
    counted = {
        Condition.OK: metrics.origins_ok,
        Condition.WARNING: metrics.origins_warning,
        Condition.ERROR: metrics.origins_error,
    }
    assert counted == expected and sum(counted.values()) == metrics.origins_enabled == 75
    assert min(counted.values()) > 0  # the world has all three


def test_a_success_without_a_snapshot_id_counts_as_visited(
    store: Any, lister: str, now: datetime
) -> None:
    """A loader that gives its verdict and no snapshot id (``uneventful``)
    visited the origin: it is no longer never visited, and a forge change
    after that visit is a pending change."""
    record(store, lister, now - 50 * D, quiet=now - 30 * D, fresh=now - 30 * D)
    message = VisitStatusMessage(url("quiet"), "git", now - 20 * D, "full", None, eventful=False)  # type: ignore[arg-type]
    assert store.record_visit_statuses([message]) == (1, 0)
    assert peek(store, VisitPolicy.NEVER_VISITED_OLDEST_UPDATE_FIRST, now) == ["fresh"]
    record(store, lister, now - 50 * D, quiet=now - D)  # changed since
    assert peek(store, VisitPolicy.ALREADY_VISITED_ORDER_BY_LAG, now) == ["quiet"]
