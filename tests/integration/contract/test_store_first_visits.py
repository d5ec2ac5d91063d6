"""``mark_first_visits_scheduled`` in the store (SQLite, PostgreSQL, indexed,
remote; issue 59): a lister awaiting its first visits is marked only once
every enabled origin it lists was scheduled at or after its last finished
listing; one without a prefix, without a finished listing or marked already
is left as it is; the mark gives a new token, so a lister's older copy
cannot write it back to null; bad input is refused by field."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput, NotFound, StaleUpdate
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.visits.model import ListedOrigin

H = timedelta(hours=1)


@pytest.fixture
def visit_types(store: Any) -> None:
    for kind in ("git", "hg"):
        store.create_task_type(TaskType(type=f"load-{kind}", backend_name=f"loader.{kind}"))


def listed(store: Any, lister_id: str, kind: str, count: int, now: datetime) -> list[str]:
    urls = [f"https://forge.example/{lister_id[:6]}/{kind}{n}" for n in range(count)]
    store.record_listed_origins([ListedOrigin(lister_id, u, kind) for u in urls], now=now)
    return urls


def finished(store: Any, name: str, prefix: str | None, at: datetime, **fields: Any) -> Any:
    lister = store.get_or_create_lister(name, "", prefix, now=at - H)
    changed = dataclasses.replace(lister, last_listing_finished_at=at, **fields)
    return store.update_lister(changed, now=at)


def test_a_lister_is_marked_once_every_origin_was_scheduled_after_its_listing(
    store: Any, visit_types: None, now: datetime
) -> None:
    lister = finished(store, "gitlab", "fast", now)
    git = listed(store, lister.id, "git", 3, now - H)
    hg = listed(store, lister.id, "hg", 2, now - H)
    assert store.mark_first_visits_scheduled(lister.id, now=now + H) is None  # none sent
    policy = "first_visits_after_listing"
    assert len(store.grab_next_visits("git", 3, policy, now=now + H, lister_id=lister.id)) == 3
    assert store.mark_first_visits_scheduled(lister.id, now=now + H) is None  # hg waits
    assert len(store.grab_next_visits("hg", 1, policy, now=now + H, lister_id=lister.id)) == 1
    assert store.mark_first_visits_scheduled(lister.id, now=now + H) is None  # one hg waits
    assert len(store.grab_next_visits("hg", 5, policy, now=now + H, lister_id=lister.id)) == 1
    marked = store.mark_first_visits_scheduled(lister.id, now=now + 2 * H)
    assert marked is not None and marked.first_visits_scheduled_at == now + 2 * H
    assert marked.updated > lister.updated
    assert store.get_listers(with_first_visits_to_schedule=True) == []
    assert store.mark_first_visits_scheduled(lister.id, now=now + 3 * H) is None  # already
    assert store.get_listers_by_id([lister.id]) == [marked]
    stats = store.origin_visit_stats_get([(u, "git") for u in git] + [(u, "hg") for u in hg])
    assert {s.last_scheduled for s in stats} == {now + H}
    # the lister's copy read before the mark cannot write it back to null
    with pytest.raises(StaleUpdate) as refused:
        store.update_lister(dataclasses.replace(lister, current_state={"page": 9}), now=now)
    assert refused.value.field == "updated"


def test_origins_scheduled_before_the_listing_ended_still_wait(
    store: Any, visit_types: None, now: datetime
) -> None:
    """Scheduled by the recurrent mix before the listing finished: not a
    first visit of this listing; scheduled after it: one (no message
    needed); a disabled origin is not waited for."""
    lister = store.get_or_create_lister("cgit", "", "fast", now=now - 3 * H)
    urls = listed(store, lister.id, "git", 4, now - 3 * H)
    assert len(store.grab_next_visits("git", 4, "oldest_scheduled_first", now=now - 2 * H)) == 4
    lister = store.update_lister(
        dataclasses.replace(lister, last_listing_finished_at=now - H), now=now - H
    )
    assert store.mark_first_visits_scheduled(lister.id, now=now) is None
    later = now + 30 * 24 * H  # out of the scheduled cooldown
    assert len(store.grab_next_visits("git", 3, "oldest_scheduled_first", now=later)) == 3
    assert store.mark_first_visits_scheduled(lister.id, now=later) is None  # one waits
    [waiting] = [
        s.url
        for s in store.origin_visit_stats_get([(u, "git") for u in urls])
        if s.last_scheduled != later
    ]
    store.record_listed_origins([ListedOrigin(lister.id, waiting, "git", enabled=False)], now=later)
    assert store.mark_first_visits_scheduled(lister.id, now=later) is not None


def test_a_lister_awaiting_no_first_visits_is_left_alone(
    store: Any, visit_types: None, now: datetime
) -> None:
    no_prefix = finished(store, "pypi", None, now)
    not_finished = store.get_or_create_lister("npm", "", "fast", now=now)
    marked_before = finished(store, "cran", "fast", now, first_visits_scheduled_at=now)
    empty = finished(store, "gitea", "fast", now)  # lists nothing: nothing waits
    for lister in (no_prefix, not_finished, marked_before):
        assert store.mark_first_visits_scheduled(lister.id, now=now + H) is None
        assert store.get_listers_by_id([lister.id]) == [lister]  # nothing written
    assert store.mark_first_visits_scheduled(empty.id, now=now + H) is not None


def test_bad_input_is_refused_by_field(store: Any, now: datetime) -> None:
    with pytest.raises(NotFound):
        store.mark_first_visits_scheduled("0" * 32, now=now)
    with pytest.raises(InvalidInput) as refused:
        store.mark_first_visits_scheduled(42, now=now)
    assert refused.value.field.endswith("lister_id")
