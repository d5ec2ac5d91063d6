"""``grab_next_visits`` and its policies, as swh-scheduler's own tests check
them (``swh/scheduler/tests/test_scheduler.py``), through its client.

Each case names the reference test it stands for; where ours differs on
purpose, the case checks our documented behaviour and names the document.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

import attr
from common import SNAPSHOT, UTC, Case, case, expect_raises, now, run
from swh.scheduler.exc import SchedulerException, UnknownPolicy
from swh.scheduler.model import LastVisitStatus, ListedOrigin, OriginVisitStats

BASE = datetime(2020, 1, 1, tzinfo=UTC)
#: the reference's four cooldowns
KINDS = ("scheduled", "failed", "not_found", "absolute")


def _recorded(c: Case, per_type: int = 100) -> tuple[str, list[ListedOrigin]]:
    """The first visit type's origins, recorded: (visit type, as recorded)."""
    visit_type = c.visit_types[0]
    origins = c.origins_by_type(c.stored_lister(), per_type)[visit_type]
    return visit_type, c.scheduler.record_listed_origins(origins)


#: how far the database's clock and this process's may read apart
CLOCKS = timedelta(seconds=1)


def _grabbed_once(
    c: Case, visit_type: str, policy: str, expected: list[ListedOrigin], **kwargs: Any
) -> datetime:
    """One more than ``expected`` asked: exactly ``expected``, in order, each
    marked scheduled during the call, and none of them again at once. The
    instant after the grab."""
    assert expected
    scheduler = c.scheduler
    before = now()
    got = scheduler.grab_next_visits(visit_type, len(expected) + 1, policy, **kwargs)
    after = now()
    assert got == expected, ([o.url for o in got], [o.url for o in expected])
    stats = scheduler.origin_visit_stats_get([(o.url, o.visit_type) for o in expected])
    assert len(stats) == len(expected)
    # (the instant is the database's clock, read by the server: not this
    # client's, so a little slack either side; the reference's test reads one)
    for one in stats:
        assert before - CLOCKS <= one.last_scheduled <= after + CLOCKS, (
            before,
            one.last_scheduled,
            after,
        )
    again = scheduler.grab_next_visits(visit_type, len(expected) + 1, policy, **kwargs)
    assert again == [], "grabbed again at once: " + str([o.url for o in again])
    return after


def _grabbed_then_again_a_week_later(
    c: Case, visit_type: str, policy: str, expected: list[ListedOrigin]
) -> None:
    after = _grabbed_once(c, visit_type, policy, expected)
    week_later = c.scheduler.grab_next_visits(
        visit_type, len(expected) + 1, policy, timestamp=after + timedelta(days=7)
    )
    assert sorted(week_later) == sorted(expected), "not grabbed again a week later"


def _scheduled_long_ago_but_one(c: Case) -> tuple[str, list[ListedOrigin], list[ListedOrigin]]:
    """Every origin but the first scheduled in 2020, a second apart: the
    first, then the others latest-recorded first, is the expected order."""
    visit_type, origins = _recorded(c)
    c.scheduler.origin_visit_stats_upsert([
        OriginVisitStats(url=o.url, visit_type=o.visit_type, last_snapshot=None,
                         last_successful=None, last_visit=None,
                         last_scheduled=BASE - timedelta(seconds=n))
        for n, o in enumerate(origins[1:])
    ])  # fmt: skip
    return visit_type, origins, [origins[0], *origins[1:][::-1]]


@case
def oldest_scheduled_first_takes_never_scheduled_then_oldest(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visits_oldest_scheduled_first
    visit_type, _, expected = _scheduled_long_ago_but_one(c)
    _grabbed_then_again_a_week_later(c, visit_type, "oldest_scheduled_first", expected)


@case
def each_cooldown_holds_an_origin_until_it_is_over(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visits_cooldowns, its eight
    # (cooldown, days) pairs each on a visit type of its own, 10 origins each
    for which in KINDS:
        for days in (7, 15):
            c.visit_types = [f"{c.ns}-{which}-{days}"]
            c.register(c.visit_types)
            visit_type, origins = _recorded(c, per_type=10)
            after = _grabbed_once(c, visit_type, "oldest_scheduled_first", origins)
            fields: dict[str, Any] = dict.fromkeys(
                ("last_visit", "last_visit_status", "last_scheduled", "last_successful",
                 "last_snapshot")
            )  # fmt: skip
            if which == "scheduled":
                fields["last_scheduled"] = after
            elif which == "absolute":
                fields.update(last_visit=after, last_successful=after, last_snapshot=SNAPSHOT,
                              last_visit_status=LastVisitStatus.successful)  # fmt: skip
            else:
                fields.update(last_visit=after, last_visit_status=LastVisitStatus(which))
            c.scheduler.origin_visit_stats_upsert(
                [OriginVisitStats(url=o.url, visit_type=o.visit_type, **fields) for o in origins]
            )
            cooldown = timedelta(days=days)
            cooldowns: dict[str, Any] = {f"{kind}_cooldown": None for kind in KINDS}
            cooldowns[f"{which}_cooldown"] = cooldown
            asked = (visit_type, len(origins) + 1, "oldest_scheduled_first")
            at = after + cooldown - timedelta(seconds=1)
            held = c.scheduler.grab_next_visits(*asked, timestamp=at, **cooldowns)
            assert held == [], f"{which}_cooldown of {days} days ignored: {len(held)}"
            at = after + cooldown + timedelta(seconds=1)
            over = c.scheduler.grab_next_visits(*asked, timestamp=at, **cooldowns)
            assert sorted(over) == sorted(origins), f"{which}_cooldown {days} days: {len(over)}"


@case
def tablesample_is_refused_naming_it(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visits_tablesample (a smoke
    # test that a sample answers). Divergence, docs/howto/http-api.md ("What
    # differs"): `tablesample` is refused, our claims read indexes, not samples
    visit_type, _, expected = _scheduled_long_ago_but_one(c)
    error = expect_raises(SchedulerException, lambda: c.scheduler.grab_next_visits(
        visit_type, len(expected), "oldest_scheduled_first", tablesample=50))  # fmt: skip
    assert "tablesample" in str(error), error


@case
def never_visited_oldest_update_first_takes_the_oldest_forge_date_first(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visits_never_visited_oldest_update_first
    visit_type, origins = _recorded(c)
    dated = c.scheduler.record_listed_origins(
        [attr.evolve(o, last_update=BASE - timedelta(seconds=n)) for n, o in enumerate(origins)]
    )
    expected = sorted(dated, key=attrgetter("last_update"))
    _grabbed_then_again_a_week_later(c, visit_type, "never_visited_oldest_update_first", expected)


@case
def already_visited_order_by_lag_takes_the_largest_lag_first(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visits_already_visited_order_by_lag
    visit_type, origins = _recorded(c)
    dated = c.scheduler.record_listed_origins(
        [attr.evolve(o, last_update=BASE - timedelta(seconds=n)) for n, o in enumerate(origins)]
    )
    visited_at = dated[len(dated) // 2].last_update
    visited = dated[::2]
    c.scheduler.origin_visit_stats_upsert([
        OriginVisitStats(url=o.url, visit_type=o.visit_type, last_snapshot=SNAPSHOT,
                         last_successful=visited_at, last_visit=visited_at)
        for o in visited
    ])  # fmt: skip
    expected = sorted(
        (o for o in visited if o.last_update > visited_at), key=lambda o: visited_at - o.last_update
    )
    _grabbed_then_again_a_week_later(c, visit_type, "already_visited_order_by_lag", expected)


@case
def fewer_origins_than_asked_are_all_grabbed(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visits_underflow
    visit_type, origins = _recorded(c, per_type=5)
    got = c.scheduler.grab_next_visits(visit_type, len(origins) + 2, "oldest_scheduled_first")
    assert len(got) == 5, len(got)


def _without_forge_dates(c: Case) -> tuple[str, list[ListedOrigin]]:
    visit_type = c.visit_types[0]
    origins = c.origins_by_type(c.stored_lister())[visit_type]
    undated = [attr.evolve(o, last_update=None) for o in origins]
    c.scheduler.record_listed_origins(undated)
    positions = c.scheduler.visit_scheduler_queue_position_get()
    assert visit_type not in positions, positions  # no position for the type yet
    return visit_type, undated


@case
def origins_without_last_update_are_grabbed_and_move_the_queue(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visits_no_last_update_nor_visit_stats
    visit_type, origins = _without_forge_dates(c)
    keys = [(o.url, o.visit_type) for o in origins]
    assert c.scheduler.origin_visit_stats_get(keys) == []
    got = c.scheduler.grab_next_visits(visit_type, len(origins), "origins_without_last_update")
    assert len(got) == len(origins), len(got)
    assert c.scheduler.visit_scheduler_queue_position_get()[visit_type] is not None
    assert len(c.scheduler.origin_visit_stats_get([(o.url, o.visit_type) for o in got])) == len(
        origins
    )


@case
def origins_without_last_update_move_the_queue_to_the_last_position_taken(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visits_no_last_update_with_visit_stats
    visit_type, origins = _without_forge_dates(c)
    day = 24 * 3600

    def stats(origin: ListedOrigin, position: int | None) -> OriginVisitStats:
        return OriginVisitStats(url=origin.url, visit_type=origin.visit_type,
                                last_successful=now(), last_visit=now(),
                                next_visit_queue_position=position)  # fmt: skip

    c.scheduler.origin_visit_stats_upsert(
        [stats(o, int(day * random.uniform(-10, 1))) for o in origins[:50]]
        + [stats(o, int(day * random.uniform(1, 10))) for o in origins[50:75]]
        + [stats(o, None) for o in origins[75:]]
    )
    got = c.scheduler.grab_next_visits(visit_type, len(origins), "origins_without_last_update")
    assert len(got) == len(origins), len(got)
    found = c.scheduler.origin_visit_stats_get([(o.url, o.visit_type) for o in got])
    assert len(found) == len(origins)
    positions = c.scheduler.visit_scheduler_queue_position_get()
    taken = [s.next_visit_queue_position for s in found]
    last = max(p for p in taken if p is not None)
    assert positions[visit_type] == last, (positions[visit_type], last)


@case
def an_unknown_policy_raises_unknown_policy_naming_it(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visits_unknown_policy
    error = expect_raises(
        UnknownPolicy, lambda: c.scheduler.grab_next_visits(c.visit_types[0], 5, "non_existing")
    )
    assert "non_existing" in str(error), error


@case
def one_url_and_visit_type_under_two_listers_is_grabbed_without_error(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visit_duplicates
    first_lister, second_lister = c.create_listers()[:2]
    origin = c.origins_by_type(first_lister)[c.visit_types[0]][0]
    one = attr.evolve(origin, first_seen=now(), last_seen=now())
    other = attr.evolve(
        one, lister_id=second_lister.id, last_update=one.last_update + timedelta(seconds=10)
    )
    recorded = c.scheduler.record_listed_origins([one, other])
    # The reference hands both listings out (one visit each); ours keeps one
    # row of statistics per url and visit type and hands the origin out once
    # (one of its listings), then holds it as the reference holds each
    policy = "never_visited_oldest_update_first"
    got = c.scheduler.grab_next_visits(one.visit_type, 3, policy)
    assert len(got) == 1 and got[0] in recorded, got
    assert c.scheduler.grab_next_visits(one.visit_type, 3, policy) == []
    week_later = c.scheduler.grab_next_visits(
        one.visit_type, 3, policy, timestamp=now() + timedelta(days=7)
    )
    assert [o.url for o in week_later] == [one.url], week_later


@case
def a_lister_named_keeps_the_grab_to_its_origins(c: Case) -> None:
    # reference: test_scheduler.py::test_grab_next_visit_for_specific_lister
    lister = c.stored_lister()
    visit_type, origins = _recorded(c)
    got = c.scheduler.grab_next_visits(
        visit_type, len(origins), "never_visited_oldest_update_first",
        lister_name=lister.name, lister_instance_name=lister.instance_name,
    )  # fmt: skip
    assert len(got) == len(origins), len(got)
    assert all(o.lister_id == lister.id for o in got)


if __name__ == "__main__":
    run()
