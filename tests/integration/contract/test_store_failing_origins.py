"""Failing origins disabled, as the reference's journal client does (issue
59), in the store (SQLite, PostgreSQL, indexed, remote): ``failed`` or
``not_found`` visits three times in a row disable every listing of the
origin, no policy picks it, and a lister listing it again enables it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.visits.feedback import VisitStatusMessage
from swh_like_scheduler.visits.model import ListedOrigin

H = timedelta(hours=1)
URL = "https://forge.example/dead"
OTHER = "https://forge.example/alive"


@pytest.fixture
def two_listers(store: Any, now: datetime) -> tuple[str, str]:
    store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
    first = store.get_or_create_lister("gitlab", now=now).id
    second = store.get_or_create_lister("cgit", now=now).id
    store.record_listed_origins(
        [
            ListedOrigin(lister_id=first, url=URL, visit_type="git"),
            ListedOrigin(lister_id=second, url=URL, visit_type="git"),
            ListedOrigin(lister_id=first, url=OTHER, visit_type="git"),
        ],
        now=now,
    )
    return first, second


def status(at: datetime, state: str, url: str = URL) -> VisitStatusMessage:
    return VisitStatusMessage(url, "git", at, state)  # type: ignore[arg-type]


def enabled_urls(store: Any) -> list[tuple[str, bool]]:
    page = store.get_listed_origins(enabled=None)
    return sorted({(o.url, o.enabled) for o in page.origins})


def picked(store: Any, at: datetime) -> list[str]:
    found = store.peek_next_visits("git", 10, "oldest_scheduled_first", now=at)
    return sorted(o.url for o in found)


def test_three_failures_in_a_row_disable_the_origin_until_it_is_listed_again(
    store: Any, two_listers: tuple[str, str], now: datetime
) -> None:
    late = now + 100 * 24 * H  # past every cooldown
    store.record_visit_statuses([status(now + H, "failed"), status(now + 2 * H, "failed")])
    assert (URL, False) not in enabled_urls(store)  # two: still enabled
    assert picked(store, late) == [OTHER, URL]
    store.record_visit_statuses([status(now + 3 * H, "failed"), status(now + 3 * H, "full", OTHER)])
    # every listing of the origin (both listers') is disabled, the other origin stays
    assert enabled_urls(store) == [(OTHER, True), (URL, False)]
    assert picked(store, late) == [OTHER]
    [stats] = store.origin_visit_stats_get([(URL, "git")])
    assert stats.successive_visits == 3
    # a lister lists it again: enabled, and picked again
    first, _ = two_listers
    store.record_listed_origins(
        [ListedOrigin(lister_id=first, url=URL, visit_type="git")], now=now + 4 * H
    )
    assert (URL, True) in enabled_urls(store)
    assert picked(store, late) == [OTHER, URL]


def test_not_found_counts_as_the_reference_counts_it(
    store: Any, two_listers: tuple[str, str], now: datetime
) -> None:
    """``successive_visits`` counts one outcome: failed, failed, not_found
    is one not_found in a row; three not_found disable."""
    store.record_visit_statuses(
        [status(now + H, "failed"), status(now + 2 * H, "failed"), status(now + 3 * H, "not_found")]
    )
    assert (URL, False) not in enabled_urls(store)
    store.record_visit_statuses([status(now + 4 * H, "not_found")])
    assert (URL, False) not in enabled_urls(store)
    # a stale repeat of an old status moves nothing and disables nothing
    store.record_visit_statuses([status(now + 4 * H, "not_found")])
    assert (URL, False) not in enabled_urls(store)
    store.record_visit_statuses([status(now + 5 * H, "not_found")])
    assert (URL, False) in enabled_urls(store)


def test_a_success_between_failures_starts_the_count_again(
    store: Any, two_listers: tuple[str, str], now: datetime
) -> None:
    store.record_visit_statuses(
        [
            status(now + H, "failed"),
            status(now + 2 * H, "failed"),
            VisitStatusMessage(URL, "git", now + 3 * H, "full", "a" * 40),  # type: ignore[arg-type]
            status(now + 4 * H, "failed"),
            status(now + 5 * H, "failed"),
        ]
    )
    assert (URL, False) not in enabled_urls(store)
    [stats] = store.origin_visit_stats_get([(URL, "git")])
    assert stats.successive_visits == 2
