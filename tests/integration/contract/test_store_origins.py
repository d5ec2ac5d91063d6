"""Listers, listed origins, visit statistics and metrics in the store
(SQLite, PostgreSQL, indexed, remote): the reference's method names and
semantics, pages, optimistic updates, idempotent records, refusals that
name the field and write nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput, NotFound, StaleUpdate
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.visits.feedback import VisitStatusMessage
from swh_like_scheduler.visits.model import LastVisitStatus, ListedOrigin, OriginVisitStats

H = timedelta(hours=1)
SNAP = [f"{n:040x}" for n in range(1, 10)]


@pytest.fixture
def visit_types(store: Any) -> None:
    for kind in ("git", "hg"):
        store.create_task_type(TaskType(type=f"load-{kind}", backend_name=f"loader.{kind}"))


def origins(lister_id: str, count: int, *, kind: str = "git", **fields: Any) -> list[ListedOrigin]:
    return [
        ListedOrigin(
            lister_id=lister_id,
            url=f"https://forge.example/group/p{n:04d}",
            visit_type=kind,
            **fields,
        )
        for n in range(count)
    ]


def test_get_or_create_lister_gives_one_lister_per_name_and_instance(
    store: Any, now: datetime
) -> None:
    first = store.get_or_create_lister("gitlab", "framagit", now=now)
    assert first.id and first.current_state == {} and first.created == first.updated == now
    again = store.get_or_create_lister("gitlab", "framagit", now=now + H)
    assert again == first  # the same lister, nothing changed
    other = store.get_or_create_lister("gitlab", "salsa", now=now)
    assert other.id != first.id
    assert [(x.name, x.instance_name) for x in store.get_listers()] == [
        ("gitlab", "framagit"),
        ("gitlab", "salsa"),
    ]
    with pytest.raises(InvalidInput) as refused:
        store.get_or_create_lister("git lab", now=now)
    assert refused.value.field == "name"


def test_update_lister_is_refused_on_a_stale_token(store: Any, now: datetime) -> None:
    lister = store.get_or_create_lister("pypi", now=now)
    moved = lister.__class__(**{**vars(lister), "current_state": {"page": 2}})
    stored = store.update_lister(moved, now=now + H)
    assert stored.current_state == {"page": 2} and stored.updated == now + H
    # a second process still holding the first copy: refused, nothing written
    stale = lister.__class__(**{**vars(lister), "current_state": {"page": 1}})
    with pytest.raises(StaleUpdate) as refused:
        store.update_lister(stale, now=now + 2 * H)
    assert refused.value.field == "updated"
    [kept] = store.get_listers()
    assert kept.current_state == {"page": 2}
    # two updates within one instant still give two tokens
    newer = store.update_lister(stored, now=now)
    assert newer.updated > stored.updated
    with pytest.raises(NotFound):
        store.update_lister(stored.__class__(**{**vars(newer), "id": "0" * 32}), now=now)


def test_record_listed_origins_is_an_idempotent_upsert(
    store: Any, visit_types: None, now: datetime
) -> None:
    lister = store.get_or_create_lister("gitlab", "framagit", now=now)
    given = origins(lister.id, 3, last_update=now - H)
    recorded = store.record_listed_origins(given, now=now)
    assert [o.url for o in recorded] == [o.url for o in given]
    assert all(o.first_seen == o.last_seen == now for o in recorded)
    # the same page a day later: last_seen moves, first_seen stays
    changed = [given[0], given[1].__class__(**{**vars(given[1]), "enabled": False}), given[2]]
    again = store.record_listed_origins(changed, now=now + 24 * H)
    assert [o.first_seen for o in again] == [now] * 3
    assert [o.last_seen for o in again] == [now + 24 * H] * 3
    assert [o.enabled for o in again] == [True, False, True]
    page = store.get_listed_origins(lister_id=lister.id, enabled=None)
    assert len(page.origins) == 3 and page.next_page_token is None
    assert len(store.get_listed_origins(lister_id=lister.id).origins) == 2  # enabled only


def test_an_origin_given_twice_in_one_call_counts_once_the_last(
    store: Any, visit_types: None, now: datetime
) -> None:
    lister = store.get_or_create_lister("cgit", now=now)
    [one] = origins(lister.id, 1)
    twice = [one, one.__class__(**{**vars(one), "extra_loader_arguments": {"branch": "dev"}})]
    recorded = store.record_listed_origins(twice, now=now)
    assert [o.extra_loader_arguments for o in recorded] == [{"branch": "dev"}] * 2
    assert len(store.get_listed_origins().origins) == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"url": "not a url"}, "url"),
        ({"url": "gitlab.com/group/project"}, "url"),
        ({"visit_type": "svn"}, "visit_type"),  # no task type load-svn
        ({"visit_type": "g it"}, "visit_type"),
        ({"last_update": datetime(2026, 1, 1)}, "last_update"),
        ({"lister_id": "no-such-lister"}, "lister_id"),
        ({"extra_loader_arguments": ["a"]}, "extra_loader_arguments"),
    ],
)
def test_a_bad_origin_is_refused_by_field_and_nothing_is_written(
    store: Any, visit_types: None, now: datetime, fields: dict[str, Any], field: str
) -> None:
    lister = store.get_or_create_lister("gitlab", now=now)
    good = origins(lister.id, 2)
    with pytest.raises(InvalidInput) as refused:
        bad = ListedOrigin(**{**vars(good[0]), "url": "https://forge.example/bad", **fields})
        store.record_listed_origins([good[1], bad], now=now)
    assert refused.value.field == field
    assert store.get_listed_origins(enabled=None).origins == ()


def test_listed_origins_come_in_pages_by_token(
    store: Any, visit_types: None, now: datetime
) -> None:
    first = store.get_or_create_lister("gitlab", "a", now=now)
    second = store.get_or_create_lister("gitlab", "b", now=now)
    store.record_listed_origins(origins(first.id, 7) + origins(second.id, 5, kind="hg"), now=now)
    seen: list[tuple[str, str, str]] = []
    token = None
    while True:
        page = store.get_listed_origins(limit=3, page_token=token)
        seen.extend(o.key for o in page.origins)
        token = page.next_page_token
        if token is None:
            break
    assert len(seen) == 12 and seen == sorted(seen) and len(set(seen)) == 12
    only = store.get_listed_origins(lister_id=second.id, limit=100)
    assert {o.visit_type for o in only.origins} == {"hg"} and len(only.origins) == 5
    url = "https://forge.example/group/p0001"
    assert len(store.get_listed_origins(url=url).origins) == 2  # one per lister
    urls = [url, "https://forge.example/group/p0006"]
    assert len(store.get_listed_origins(urls=urls, lister_id=first.id).origins) == 2
    for bad, field in (({"page_token": "garbage!"}, "page_token"), ({"limit": 0}, "limit")):
        with pytest.raises(InvalidInput) as refused:
            store.get_listed_origins(**bad)
        assert refused.value.field in (field, f"kwargs.{field}")


def test_visit_stats_upsert_keeps_stored_fields_given_as_none(store: Any, now: datetime) -> None:
    url = "https://forge.example/a"
    store.origin_visit_stats_upsert(
        [
            OriginVisitStats(
                url=url,
                visit_type="git",
                last_visit=now,
                last_visit_status=LastVisitStatus.SUCCESSFUL,
                last_successful=now,
                last_snapshot=SNAP[0],
            )
        ]
    )
    store.origin_visit_stats_upsert(
        [OriginVisitStats(url=url, visit_type="git", last_scheduled=now + H)]
    )
    [stats] = store.origin_visit_stats_get([(url, "git"), ("https://forge.example/b", "git")])
    assert stats.last_scheduled == now + H and stats.last_snapshot == SNAP[0]
    assert stats.last_visit_status is LastVisitStatus.SUCCESSFUL
    with pytest.raises(InvalidInput):
        store.origin_visit_stats_get([("not a url", "git")])


def test_visit_statuses_move_the_statistics_once(store: Any, now: datetime) -> None:
    url = "https://forge.example/a"

    def status(at: datetime, state: str, snapshot: str | None = None) -> VisitStatusMessage:
        return VisitStatusMessage(url, "git", at, state, snapshot)  # type: ignore[arg-type]

    stream = [
        status(now, "created"),
        status(now + 1 * H, "ongoing"),
        status(now + 2 * H, "full", SNAP[0]),
        status(now + 3 * H, "failed"),
        status(now + 4 * H, "partial", SNAP[0]),
    ]
    assert store.record_visit_statuses(stream) == (3, 2)
    [stats] = store.origin_visit_stats_get([(url, "git")])
    assert stats.last_visit == now + 4 * H and stats.last_successful == now + 4 * H
    assert stats.last_snapshot == SNAP[0] and stats.last_visit_status is LastVisitStatus.SUCCESSFUL
    assert store.record_visit_statuses(stream) == (0, 5)  # the same stream again: nothing
    assert store.origin_visit_stats_get([(url, "git")]) == [stats]


def test_two_feeds_at_once_lose_no_status(store: Any, now: datetime) -> None:
    """Eight writers record statuses of the same origins at once; every
    origin ends at its latest status, whoever wrote it."""
    urls = [f"https://forge.example/o{n}" for n in range(20)]

    def feed(writer: int) -> tuple[int, int]:
        at = now + writer * H
        return store.record_visit_statuses(
            [VisitStatusMessage(u, "git", at, "full", SNAP[writer]) for u in urls]  # type: ignore[arg-type]
        )

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(feed, range(8)))
    assert sum(changed for changed, _ in results) >= 20
    found = store.origin_visit_stats_get([(u, "git") for u in urls])
    assert {(s.last_visit, s.last_snapshot) for s in found} == {(now + 7 * H, SNAP[7])}


def test_metrics_count_known_enabled_never_visited_and_pending(
    store: Any, visit_types: None, now: datetime
) -> None:
    lister = store.get_or_create_lister("gitlab", now=now)
    given = origins(lister.id, 6, last_update=now)
    given[5] = given[5].__class__(**{**vars(given[5]), "enabled": False})
    store.record_listed_origins(given + origins(lister.id, 2, kind="hg"), now=now)
    done = [
        VisitStatusMessage(given[0].url, "git", now - H, "full", SNAP[0]),  # type: ignore[arg-type]
        VisitStatusMessage(given[1].url, "git", now + H, "full", SNAP[1]),  # type: ignore[arg-type]
        VisitStatusMessage(given[2].url, "git", now + H, "failed"),  # type: ignore[arg-type]
    ]
    store.record_visit_statuses(done)
    metrics = store.update_metrics(now=now + 2 * H)
    by_type = {m.visit_type: m for m in metrics}
    git = by_type["git"]
    # never visited as the reference counts it: enabled, no success (p0002 failed)
    assert (git.origins_known, git.origins_enabled, git.origins_never_visited) == (6, 5, 3)
    assert git.origins_never_attempted == 2  # what it counted before: no visit ended
    assert git.origins_with_pending_changes == 1  # p0000: changed after its success
    assert (by_type["hg"].origins_known, by_type["hg"].origins_never_visited) == (2, 2)
    assert store.get_metrics(visit_type="git") == [git]
    assert git.last_update == now + 2 * H


def test_an_origin_of_two_listers_is_counted_once_under_the_one_that_enables_it(
    store: Any, visit_types: None, now: datetime
) -> None:
    first = store.get_or_create_lister("a-lister", now=now)
    second = store.get_or_create_lister("b-lister", now=now)
    [shared] = origins(first.id, 1, last_update=now)
    disabled = shared.__class__(**{**vars(shared), "enabled": False})
    store.record_listed_origins([disabled], now=now)
    store.record_listed_origins(
        [shared.__class__(**{**vars(shared), "lister_id": second.id})], now=now + H
    )
    [metrics] = store.update_metrics(now=now + 2 * H)
    assert (metrics.lister_id, metrics.origins_known, metrics.origins_enabled) == (second.id, 1, 1)
    # the policies see it enabled, and send it once, as the enabling lister's
    [grabbed] = store.grab_next_visits("git", 10, "oldest_scheduled_first", now=now + 2 * H)
    assert grabbed.lister_id == second.id
    store.record_listed_origins(
        [shared.__class__(**{**vars(shared), "enabled": False, "lister_id": second.id})],
        now=now + 3 * H,
    )
    assert store.peek_next_visits("git", 10, "oldest_scheduled_first", now=now + 30 * H) == []
    store.record_listed_origins([shared], now=now + 4 * H)  # the first lister enables it again
    [metrics] = store.update_metrics(now=now + 5 * H)
    assert (metrics.lister_id, metrics.origins_enabled) == (first.id, 1)


def test_careless_values_are_refused_by_field(store: Any, visit_types: None, now: datetime) -> None:
    """Values of the wrong kind, as a careless client sends them over /rpc."""
    calls = [
        (lambda: store.get_listed_origins(lister_id=5), "lister_id"),
        (lambda: store.get_listed_origins(enabled="yes"), "enabled"),
        (lambda: store.update_metrics(lister_id=["x"], now=now), "lister_id"),
        (lambda: store.get_metrics(visit_type=3), "visit_type"),
        (lambda: store.peek_next_visits("git", 5, "deadline", lister_id=1), "lister_id"),
        (lambda: store.peek_next_visits("git", 5, "deadline", enabled="no"), "enabled"),
        (lambda: store.record_listed_origins(["https://a.b/c"], now=now), "origins[0]"),
        (lambda: store.record_visit_statuses([{"origin": "x"}]), "messages[0]"),
        (lambda: store.origin_visit_stats_get([("https://a.b/c",)]), "ids[0]"),
        (lambda: store.update_metrics(now="yesterday"), "now"),
    ]
    for call, field in calls:
        with pytest.raises(InvalidInput) as refused:
            call()
        assert refused.value.field in (field, f"kwargs.{field}", "args"), (field, refused.value)
