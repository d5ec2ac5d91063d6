"""Visit statistics, the visit scheduler's queue positions and the scheduler
metrics, as swh-scheduler's own tests check them
(``swh/scheduler/tests/test_scheduler.py``), through its client.

Each case names the reference test it stands for; where ours differs on
purpose, the case checks our documented behaviour and names the document.
"""

from __future__ import annotations

import datetime
import uuid
from datetime import timedelta
from operator import attrgetter
from typing import Any

import attr
from common import OTHER_SNAPSHOT, SNAPSHOT, UTC, Case, case, expect_raises, now, run
from swh.scheduler.exc import SchedulerException
from swh.scheduler.model import OriginVisitStats

BY_KEY = attrgetter("lister_id", "visit_type")


def _mine(c: Case, metrics: list[Any]) -> list[Any]:
    """``metrics`` narrowed to this case's visit types, in a fixed order."""
    return sorted((x for x in metrics if x.visit_type in c.visit_types), key=BY_KEY)


@case
def no_keys_no_statistics(c: Case) -> None:
    # reference: test_scheduler.py::test_origin_visit_stats_get_empty
    assert c.scheduler.origin_visit_stats_get([]) == []


@case
def statistics_upserted_in_one_batch_are_read_back_alike(c: Case) -> None:
    # reference: test_scheduler.py::test_origin_visit_stats_get
    stats = [
        OriginVisitStats(url=f"https://{c.ns}.example.com/origin-{n:03d}", visit_type="git",
                         last_successful=now(), last_visit=now())
        for n in range(250)
    ]  # fmt: skip
    c.scheduler.origin_visit_stats_upsert(stats)
    found = c.scheduler.origin_visit_stats_get([(s.url, s.visit_type) for s in stats])
    assert set(found) == set(stats), (len(found), next(iter(set(found) - set(stats)), None))


@case
def an_upsert_without_a_success_keeps_the_last_success(c: Case) -> None:
    # reference: test_scheduler.py::test_origin_visit_stats_upsert
    url, eventful = f"https://{c.ns}.example.com/test", now()
    stats = OriginVisitStats(url=url, visit_type="git", last_successful=eventful,
                             last_visit=eventful)  # fmt: skip
    c.scheduler.origin_visit_stats_upsert([stats])
    c.scheduler.origin_visit_stats_upsert([stats])
    assert c.scheduler.origin_visit_stats_get([(url, "git")]) == [stats]
    assert c.scheduler.origin_visit_stats_get([(url, "svn")]) == []
    later = now()
    c.scheduler.origin_visit_stats_upsert(
        [OriginVisitStats(url=url, visit_type="git", last_successful=None, last_visit=later)]
    )
    assert c.scheduler.origin_visit_stats_get([(url, "git")]) == [
        OriginVisitStats(url=url, visit_type="git", last_successful=eventful, last_visit=later)
    ]


@case
def a_snapshot_upserted_is_read_back(c: Case) -> None:
    # reference: test_scheduler.py::test_origin_visit_stats_upsert_with_snapshot
    url = f"https://{c.ns}.example.com/666/test"
    stats = OriginVisitStats(url=url, visit_type="git", last_successful=now(),
                             last_snapshot=SNAPSHOT)  # fmt: skip
    c.scheduler.origin_visit_stats_upsert([stats])
    assert c.scheduler.origin_visit_stats_get([(url, "git")]) == [stats]
    assert c.scheduler.origin_visit_stats_get([(url, "svn")]) == []


def _bare_name_refused(c: Case, name: str) -> str:
    """The reference's cases name origins ``foo`` and ``bar``: ours refuses an
    origin url without a scheme of ``[scheduler.visits] origin_schemes``
    (docs/howto/http-api.md, the row "a loader sent elsewhere than the
    origin shown"; docs/reference/configuration.md), naming ``url``; the
    case then runs on a url of that name."""
    bare = OriginVisitStats(url=name, visit_type="git", last_visit=now())
    error = expect_raises(SchedulerException, lambda: c.scheduler.origin_visit_stats_upsert([bare]))
    assert "url" in str(error) and "is not a URL" in str(error), error
    return f"https://{c.ns}.example.com/{name}"


@case
def statistics_of_two_urls_upserted_together_are_both_there(c: Case) -> None:
    # reference: test_scheduler.py::test_origin_visit_stats_upsert_batch
    foo, bar = _bare_name_refused(c, "foo"), _bare_name_refused(c, "bar")
    stats = [
        OriginVisitStats(url=foo, visit_type="git", last_successful=now(),
                         last_snapshot=SNAPSHOT),
        OriginVisitStats(url=bar, visit_type="git", last_visit=now(),
                         last_snapshot=OTHER_SNAPSHOT),
    ]  # fmt: skip
    c.scheduler.origin_visit_stats_upsert(stats)
    found = c.scheduler.origin_visit_stats_get([(s.url, s.visit_type) for s in stats])
    assert len(found) == 2 and all(s is not None for s in found), found


@case
def one_url_twice_in_one_upsert_does_not_fail(c: Case) -> None:
    # reference: test_scheduler.py::test_origin_visit_stats_upsert_same_url
    url = _bare_name_refused(c, "foo")
    c.scheduler.origin_visit_stats_upsert([
        OriginVisitStats(url=url, visit_type="git", last_successful=None, last_visit=now()),
        OriginVisitStats(url=url, visit_type="git", last_successful=now(), last_visit=None),
    ])  # fmt: skip


@case
def queue_positions_set_per_visit_type_are_read_back(c: Case) -> None:
    # reference: test_scheduler.py::test_visit_scheduler_queue_position (narrowed
    # to this case's visit types)
    def mine() -> dict[str, Any]:
        found = c.scheduler.visit_scheduler_queue_position_get()
        return {k: v for k, v in found.items() if k in c.visit_types}

    assert mine() == {}
    c.scheduler.record_listed_origins(c.listed_origins(c.stored_lister(), per_type=2))
    for visit_type in c.visit_types:
        c.scheduler.visit_scheduler_queue_position_set(visit_type, 42)
    assert mine() == dict.fromkeys(c.visit_types, 42)


def _listed(c: Case) -> list[Any]:
    origins = c.listed_origins(c.stored_lister())
    c.scheduler.record_listed_origins(origins)
    return origins


@case
def metrics_count_every_origin_known(c: Case) -> None:
    # reference: test_scheduler.py::test_metrics_origins_known
    origins = _listed(c)
    assert sum(x.origins_known for x in _mine(c, c.scheduler.update_metrics())) == len(origins)


@case
def metrics_count_a_disabled_origin_out_of_the_enabled(c: Case) -> None:
    # reference: test_scheduler.py::test_metrics_origins_enabled
    origins = _listed(c)
    disabled = attr.evolve(origins[0], enabled=False)
    c.scheduler.record_listed_origins([disabled])
    metrics = c.scheduler.update_metrics(lister_id=disabled.lister_id)
    assert len(metrics) == len(c.visit_types)
    for x in metrics:
        gone = 1 if x.visit_type == disabled.visit_type else 0
        assert x.origins_known - x.origins_enabled == gone, x


@case
def metrics_count_an_origin_visited_successfully_out_of_the_never_visited(c: Case) -> None:
    # reference: test_scheduler.py::test_metrics_origins_never_visited
    origins = _listed(c)
    visited = origins[0]
    c.scheduler.origin_visit_stats_upsert([OriginVisitStats(
        url=visited.url, visit_type=visited.visit_type, last_successful=now(),
        last_snapshot=SNAPSHOT)])  # fmt: skip
    metrics = c.scheduler.update_metrics(lister_id=visited.lister_id)
    assert len(metrics) == len(c.visit_types)
    for x in metrics:
        seen = 1 if x.visit_type == visited.visit_type else 0
        assert x.origins_known - x.origins_never_visited == seen, x


@case
def metrics_count_an_origin_changed_since_its_last_success_as_pending(c: Case) -> None:
    # reference: test_scheduler.py::test_metrics_origins_with_pending_changes
    origins = _listed(c)
    visited = origins[0]
    before = visited.last_update - timedelta(days=1)
    c.scheduler.origin_visit_stats_upsert([OriginVisitStats(
        url=visited.url, visit_type=visited.visit_type, last_successful=before,
        last_snapshot=SNAPSHOT)])  # fmt: skip
    metrics = c.scheduler.update_metrics(lister_id=visited.lister_id)
    assert len(metrics) == len(c.visit_types)
    for x in metrics:
        pending = 1 if x.visit_type == visited.visit_type else 0
        assert x.origins_with_pending_changes == pending, x


@case
def metrics_of_an_unknown_lister_are_none(c: Case) -> None:
    # reference: test_scheduler.py::test_update_metrics_explicit_lister
    _listed(c)
    assert c.scheduler.update_metrics(lister_id=uuid.uuid4()) == []


@case
def metrics_are_stamped_with_the_timestamp_given(c: Case) -> None:
    # reference: test_scheduler.py::test_update_metrics_explicit_timestamp
    _listed(c)
    stamp = datetime.datetime(2020, 1, 1, tzinfo=UTC)
    metrics = _mine(c, c.scheduler.update_metrics(timestamp=stamp))
    assert metrics and all(x.last_update == stamp for x in metrics), metrics


@case
def metrics_updated_twice_carry_the_second_timestamp(c: Case) -> None:
    # reference: test_scheduler.py::test_update_metrics_twice
    _listed(c)
    first = now()
    metrics = _mine(c, c.scheduler.update_metrics(timestamp=first))
    assert metrics and all(x.last_update == first for x in metrics), metrics
    second = first + timedelta(seconds=1)
    metrics = _mine(c, c.scheduler.update_metrics(timestamp=second))
    assert metrics and all(x.last_update == second for x in metrics), metrics


@case
def metrics_read_back_as_updated(c: Case) -> None:
    # reference: test_scheduler.py::test_get_metrics
    _listed(c)
    updated = _mine(c, c.scheduler.update_metrics())
    assert updated and _mine(c, c.scheduler.get_metrics()) == updated


@case
def metrics_read_back_for_one_lister(c: Case) -> None:
    # reference: test_scheduler.py::test_get_metrics_by_lister
    origins = _listed(c)
    other = c.create_listers()[1]  # a lister with origins of its own: left out
    c.scheduler.record_listed_origins(c.listed_origins(other, per_type=2))
    lister_id = origins[0].lister_id
    updated = _mine(c, c.scheduler.update_metrics())
    found = _mine(c, c.scheduler.get_metrics(lister_id=lister_id))
    assert found and found == [x for x in updated if x.lister_id == lister_id], found


@case
def metrics_read_back_for_one_visit_type(c: Case) -> None:
    # reference: test_scheduler.py::test_get_metrics_by_visit_type
    origins = _listed(c)
    visit_type = origins[0].visit_type
    updated = _mine(c, c.scheduler.update_metrics())
    found = sorted(c.scheduler.get_metrics(visit_type=visit_type), key=BY_KEY)
    assert found and found == [x for x in updated if x.visit_type == visit_type], found


if __name__ == "__main__":
    run()
