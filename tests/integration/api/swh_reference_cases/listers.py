"""Listers and listed origins, as swh-scheduler's own tests check them
(``swh/scheduler/tests/test_scheduler.py``), through its client.

Each case names the reference test it stands for; where ours differs on
purpose, the case checks our documented behaviour and names the document.
"""

from __future__ import annotations

import random
from datetime import timedelta
from operator import attrgetter

import attr
from common import Case, case, expect_raises, now, run, uuid
from swh.scheduler.exc import StaleData


@case
def a_lister_is_created_once_and_found_again_by_name_and_instance(c: Case) -> None:
    # reference: test_scheduler.py::test_get_or_create_lister
    created = c.create_listers()
    for lister, (name, instance) in zip(created, c.LISTERS, strict=True):
        assert (lister.name, lister.instance_name) == (c.lister_name(name), instance)
        again = c.scheduler.get_or_create_lister(lister.name, lister.instance_name)
        assert again == lister, (again, lister)


@case
def get_lister_is_none_until_the_lister_exists(c: Case) -> None:
    # reference: test_scheduler.py::test_get_lister
    for name, instance in c.LISTERS:
        assert c.scheduler.get_lister(c.lister_name(name), instance) is None
    created = c.create_listers()
    for lister in created:
        assert c.scheduler.get_lister(lister.name, lister.instance_name) == lister


@case
def get_listers_lists_every_lister_in_creation_order(c: Case) -> None:
    # reference: test_scheduler.py::test_get_listers (narrowed to this case's listers)
    assert c.mine(c.scheduler.get_listers()) == []
    created = c.create_listers()
    assert c.mine(c.scheduler.get_listers()) == created


@case
def listers_with_first_visits_to_schedule_until_they_are_scheduled(c: Case) -> None:
    # reference: test_scheduler.py::test_get_listers_with_first_visits_to_schedule
    scheduler = c.scheduler
    c.create_listers()  # none with a first-visits queue
    prioritised = [
        scheduler.get_or_create_lister(
            name=c.lister_name(name), instance_name=instance,
            first_visits_queue_prefix="high_priority",
        )
        for name, instance in (("gitlab", "gitlab.example.org"), ("gitea", "gitea.example.org"))
    ]  # fmt: skip
    listed = [lister.evolve(last_listing_finished_at=now()) for lister in prioritised]
    for lister in listed:
        scheduler.update_lister(lister)
    every = c.mine(scheduler.get_listers())
    waiting = c.mine(scheduler.get_listers(with_first_visits_to_schedule=True))
    assert len(waiting) < len(every)
    assert waiting == [
        lister.evolve(updated=found.updated) for lister, found in zip(listed, waiting, strict=True)
    ], (waiting, listed)
    for lister in waiting:
        scheduler.update_lister(lister.evolve(first_visits_scheduled_at=now() + timedelta(hours=1)))
    assert c.mine(scheduler.get_listers(with_first_visits_to_schedule=True)) == []


@case
def listers_by_id_returns_the_known_ones_in_the_order_asked(c: Case) -> None:
    # reference: test_scheduler.py::test_get_listers_by_id
    scheduler = c.scheduler
    assert scheduler.get_listers_by_id([str(uuid.uuid4())]) == []
    created = c.create_listers()
    first, second = str(created[0].id), str(created[1].id)
    assert scheduler.get_listers_by_id([first]) == [created[0]]
    assert scheduler.get_listers_by_id([second]) == [created[1]]
    assert scheduler.get_listers_by_id([first, second]) == created[:2]
    assert scheduler.get_listers_by_id([first, str(uuid.uuid4())]) == [created[0]]


@case
def update_lister_keeps_every_field_given_and_moves_updated(c: Case) -> None:
    # reference: test_scheduler.py::test_update_lister
    stored = c.stored_lister()
    finished = now()
    lister = attr.evolve(
        stored,
        current_state={"updated": "now"},
        last_listing_finished_at=finished,
        first_visits_queue_prefix="high_priority",
        first_visits_scheduled_at=finished + timedelta(hours=1),
    )
    updated = c.scheduler.update_lister(lister)
    assert updated.updated > lister.updated
    assert stored.last_listing_finished_at is None
    assert stored.first_visits_queue_prefix is None
    assert stored.first_visits_scheduled_at is None
    assert updated == attr.evolve(lister, updated=updated.updated), (updated, lister)


@case
def update_lister_with_an_old_updated_is_stale(c: Case) -> None:
    # reference: test_scheduler.py::test_update_lister_stale
    stored = c.stored_lister()
    c.scheduler.update_lister(stored)
    error = expect_raises(StaleData, lambda: c.scheduler.update_lister(stored))
    assert "state not updated" in error.args[0], error.args


@case
def recorded_origins_come_back_first_seen_when_last_seen(c: Case) -> None:
    # reference: test_scheduler.py::test_record_listed_origins
    origins = c.listed_origins(c.stored_lister())
    recorded = c.scheduler.record_listed_origins(origins)
    assert {o.url for o in recorded} == {o.url for o in origins}
    assert all(o.first_seen == o.last_seen for o in recorded)


@case
def an_origin_twice_in_one_page_is_recorded_once(c: Case) -> None:
    # reference: test_scheduler.py::test_record_listed_origins_with_duplicate
    origins = c.listed_origins(c.stored_lister())
    origins.insert(0, origins[0])
    recorded = c.scheduler.record_listed_origins(origins)
    assert len(recorded) == len(origins) - 1, len(recorded)


@case
def recording_again_keeps_first_seen_and_moves_last_seen(c: Case) -> None:
    # reference: test_scheduler.py::test_record_listed_origins_upsert
    origins = c.listed_origins(c.stored_lister())
    cutoff = 100
    assert len(c.scheduler.record_listed_origins(origins[:cutoff])) == cutoff
    recorded = c.scheduler.record_listed_origins(origins)
    assert len(recorded) == len(origins)
    assert len({o.first_seen for o in recorded}) == 2
    assert len({o.last_seen for o in recorded}) == 1


@case
def get_listed_origins_by_lister_and_url_finds_that_one(c: Case) -> None:
    # reference: test_scheduler.py::test_get_listed_origins_exact
    # (every 10th origin: one call each through HTTP; the reference asks all 500)
    origins = c.listed_origins(c.stored_lister())
    c.scheduler.record_listed_origins(origins)
    for origin in origins[::10]:
        page = c.scheduler.get_listed_origins(lister_id=origin.lister_id, url=origin.url)
        assert page.next_page_token is None
        assert [(o.lister_id, o.url) for o in page.results] == [(origin.lister_id, origin.url)]


@case
def get_listed_origins_by_urls_finds_exactly_those(c: Case) -> None:
    # reference: test_scheduler.py::test_get_listed_origins_with_urls
    origins = c.listed_origins(c.stored_lister())
    c.scheduler.record_listed_origins(origins)
    sample = [o.url for o in random.sample(origins, k=100)]
    lister_id = origins[0].lister_id
    page = c.scheduler.get_listed_origins(lister_id=lister_id, urls=sample)
    assert page.next_page_token is None
    assert all(o.lister_id == lister_id for o in page.results)
    assert {o.url for o in page.results} == set(sample)


@case
def listed_origins_page_by_limit_in_lister_and_url_order(c: Case) -> None:
    # reference: test_scheduler.py::test_get_listed_origins_limit, its three
    # (origins, limit) pairs each under a lister of its own
    listers = c.create_listers()
    for lister, (count, limit) in zip(listers, [(20, 6), (5, 42), (20, 20)], strict=False):
        origins = c.listed_origins(lister)
        added = sorted(origins[:count], key=attrgetter("lister_id", "url"))
        c.scheduler.record_listed_origins(added)
        found, calls, token = [], 0, None
        while True:
            calls += 1
            page = c.scheduler.get_listed_origins(
                lister_id=lister.id, limit=limit, page_token=token
            )
            found.extend(page.results)
            token = page.next_page_token
            if token is None:
                break
        # the reference hands a token with every full page, so a last page
        # exactly full costs one more call, an empty one (count // limit + 1);
        # ours knows there is no more and hands none: one call fewer then
        assert calls == -(-count // limit), (count, limit, calls)
        assert [(o.lister_id, o.url) for o in found] == [(o.lister_id, o.url) for o in added]


@case
def visit_types_of_a_lister_s_origins(c: Case) -> None:
    # reference: test_scheduler.py::test_get_visit_types_for_listed_origins
    lister = c.stored_lister()
    c.scheduler.record_listed_origins(c.listed_origins(lister))
    assert set(c.scheduler.get_visit_types_for_listed_origins(lister)) == set(c.visit_types)


if __name__ == "__main__":
    run()
