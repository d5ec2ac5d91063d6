"""The reference's lister reads and queue positions in the store (SQLite,
PostgreSQL, indexed, remote; issue 59): ``get_lister``,
``get_listers_by_id``, ``get_listers(with_first_visits_to_schedule=...)``,
``get_visit_types_for_listed_origins``, the grabs' ``lister_name`` and
``lister_instance_name``, and ``visit_scheduler_queue_position_get/set``."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.visits.model import ListedOrigin, OriginVisitStats

H = timedelta(hours=1)


@pytest.fixture
def visit_types(store: Any) -> None:
    for kind in ("git", "hg", "svn"):
        store.create_task_type(TaskType(type=f"load-{kind}", backend_name=f"loader.{kind}"))


def listed(lister_id: str, kind: str, *names: str) -> list[ListedOrigin]:
    return [
        ListedOrigin(lister_id=lister_id, url=f"https://forge.example/{name}", visit_type=kind)
        for name in names
    ]


def test_get_lister_reads_one_lister_and_creates_none(store: Any, now: datetime) -> None:
    made = store.get_or_create_lister("gitlab", "salsa", now=now)
    plain = store.get_or_create_lister("gitlab", now=now)
    assert store.get_lister("gitlab", "salsa") == made
    assert store.get_lister("gitlab") == plain  # None: the empty instance
    assert store.get_lister("gitlab", "") == plain
    assert store.get_lister("gitlab", "framagit") is None
    assert store.get_lister("cgit") is None
    assert len(store.get_listers()) == 2  # nothing was created
    with pytest.raises(InvalidInput) as refused:
        store.get_lister(["gitlab"])
    assert refused.value.field.endswith("name")


def test_get_listers_by_id_gives_the_known_ones_in_order(store: Any, now: datetime) -> None:
    salsa = store.get_or_create_lister("gitlab", "salsa", now=now)
    pypi = store.get_or_create_lister("pypi", now=now)
    framagit = store.get_or_create_lister("gitlab", "framagit", now=now)
    found = store.get_listers_by_id([pypi.id, "0" * 32, salsa.id, framagit.id, pypi.id])
    assert found == [framagit, salsa, pypi]
    assert store.get_listers_by_id([]) == []
    with pytest.raises(InvalidInput) as refused:
        store.get_listers_by_id("not a list")
    assert refused.value.field.endswith("lister_ids")


def test_listers_with_first_visits_to_schedule(store: Any, now: datetime) -> None:
    """The reference's rule: a listing finished, a queue prefix for its
    first visits, and those not scheduled yet."""
    waiting = store.get_or_create_lister("gitlab", "a", "gitlab-first", now=now)
    no_prefix = store.get_or_create_lister("gitlab", "b", now=now)
    not_listed = store.get_or_create_lister("gitlab", "c", "gitlab-first", now=now)
    done = store.get_or_create_lister("gitlab", "d", "gitlab-first", now=now)
    for lister, fields in (
        (waiting, {"last_listing_finished_at": now}),
        (no_prefix, {"last_listing_finished_at": now}),
        (done, {"last_listing_finished_at": now, "first_visits_scheduled_at": now + H}),
    ):
        store.update_lister(dataclasses.replace(lister, **fields), now=now + H)
    assert [x.id for x in store.get_listers(with_first_visits_to_schedule=True)] == [waiting.id]
    everyone = store.get_listers(with_first_visits_to_schedule=False)
    assert [x.id for x in everyone] == [waiting.id, no_prefix.id, not_listed.id, done.id]
    with pytest.raises(InvalidInput) as refused:
        store.get_listers(with_first_visits_to_schedule="yes")
    assert refused.value.field.endswith("with_first_visits_to_schedule")


def test_visit_types_of_a_listers_origins(store: Any, visit_types: None, now: datetime) -> None:
    one = store.get_or_create_lister("heptapod", now=now)
    other = store.get_or_create_lister("sourceforge", now=now)
    store.record_listed_origins(
        listed(one.id, "hg", "a", "b") + listed(one.id, "git", "c") + listed(other.id, "svn", "d"),
        now=now,
    )
    assert store.get_visit_types_for_listed_origins(one.id) == ["git", "hg"]
    assert store.get_visit_types_for_listed_origins(other.id) == ["svn"]
    assert store.get_visit_types_for_listed_origins("0" * 32) == []


def test_grabs_name_their_lister(store: Any, visit_types: None, now: datetime) -> None:
    salsa = store.get_or_create_lister("gitlab", "salsa", now=now)
    framagit = store.get_or_create_lister("gitlab", "framagit", now=now)
    pypi = store.get_or_create_lister("pypi", now=now)
    store.record_listed_origins(
        listed(salsa.id, "git", "s1", "s2")
        + listed(framagit.id, "git", "f1")
        + listed(pypi.id, "git", "p1"),
        now=now,
    )
    policy = "oldest_scheduled_first"

    def urls(found: list[ListedOrigin]) -> list[str]:
        return sorted(o.url.rsplit("/", 1)[-1] for o in found)

    peeked = store.peek_next_visits(
        "git", 10, policy, now=now, lister_name="gitlab", lister_instance_name="salsa"
    )
    assert urls(peeked) == ["s1", "s2"]
    assert urls(store.peek_next_visits("git", 10, policy, now=now, lister_name="pypi")) == ["p1"]
    # a name no lister has, or a name and an id that disagree: nothing
    assert store.peek_next_visits("git", 10, policy, now=now, lister_name="cgit") == []
    assert (
        store.peek_next_visits(
            "git",
            10,
            policy,
            now=now,
            lister_id=pypi.id,
            lister_name="gitlab",
            lister_instance_name="salsa",
        )
        == []
    )
    # a name with two instances: refused, nothing grabbed
    with pytest.raises(InvalidInput) as refused:
        store.grab_next_visits("git", 10, policy, now=now, lister_name="gitlab")
    assert refused.value.field.endswith("lister_instance_name")
    grabbed = store.grab_next_visits(
        "git", 10, policy, now=now, lister_name="gitlab", lister_instance_name="framagit"
    )
    assert urls(grabbed) == ["f1"]
    # only framagit's origin was marked scheduled
    left = store.peek_next_visits("git", 10, policy, now=now + H)
    assert urls(left) == ["p1", "s1", "s2"]


def test_queue_positions_are_read_and_set(store: Any, visit_types: None, now: datetime) -> None:
    assert store.visit_scheduler_queue_position_get() == {}
    lister = store.get_or_create_lister("cgit", now=now)
    store.record_listed_origins(listed(lister.id, "git", "a", "b", "c"), now=now)
    positions = {"a": now + 24 * H, "b": now + 48 * H, "c": now + 96 * H}
    store.origin_visit_stats_upsert(
        [
            OriginVisitStats(
                url=f"https://forge.example/{name}", visit_type="git", next_visit_queue_position=at
            )
            for name, at in positions.items()
        ]
    )
    store.visit_scheduler_queue_position_set("hg", now)
    store.visit_scheduler_queue_position_set("git", now - H)
    assert store.visit_scheduler_queue_position_get() == {"git": now - H, "hg": now}
    # a grab of the queue's policy moves it forth to the furthest position taken
    store.grab_next_visits("git", 2, "origins_without_last_update", now=now)
    assert store.visit_scheduler_queue_position_get()["git"] == now + 48 * H
    # the operator may move it back; it moves forth again from there
    store.visit_scheduler_queue_position_set("git", now)
    assert store.visit_scheduler_queue_position_get() == {"git": now, "hg": now}
    for bad, field in (
        ({"visit_type": "g it", "position": now}, "visit_type"),
        ({"visit_type": "git", "position": datetime(2026, 1, 1)}, "position"),
        ({"visit_type": "git", "position": None}, "position"),
    ):
        with pytest.raises(InvalidInput) as refused:
            store.visit_scheduler_queue_position_set(**bad)
        # (a remote store's wire refuses an instant without a zone before the store)
        naive = isinstance(bad["position"], datetime) and bad["position"].tzinfo is None
        assert refused.value.field.endswith(field) or (naive and refused.value.field == "kwargs")
    assert store.visit_scheduler_queue_position_get() == {"git": now, "hg": now}
