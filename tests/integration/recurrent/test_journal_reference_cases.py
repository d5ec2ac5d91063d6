"""swh-scheduler's own journal-client cases
(``swh/scheduler/tests/test_journal_client.py``), played through our
journal client (:func:`journal_step` on recorded msgpack values, as Kafka
hands them) onto the real store, SQLite and PostgreSQL.

Each test names the reference test it stands for. Two differences hold
throughout, both documented: origin urls carry a scheme
(``[scheduler.visits] origin_schemes``, docs/howto/http-api.md; the
reference's ``foo`` would be skipped as unreadable), and a message that is
not a visit status is skipped, not raised (docs/visits.md, "From the
archive's journal"). Two rules of the offset differ on purpose, listed with
their reasons in docs/visits.md ("Beside the reference"): a
failure leaves the offset as it is, and a first visit moves it like any
other; those tests check every other field as the reference does and the
offset by our rule (:func:`our_offset`).
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack
import pytest
from test_journal_client import Recorded

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.recurrent.journal import JournalStep, journal_step
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.feedback import VisitStatusMessage, apply_status, interval
from swh_like_scheduler.visits.model import LastVisitStatus, ListedOrigin, OriginVisitStats

DAY, YEAR = timedelta(days=1), timedelta(days=366)
DATE3 = datetime.now(UTC).replace(microsecond=0)
DATE2, DATE1 = DATE3 - DAY, DATE3 - 2 * DAY
FOO, BAR = "https://foo.example/foo", "https://bar.example/bar"
CAVA, ICI = "https://hg.example/cavabarder", "https://hg.example/iciaussi"

#: the two rules of the offset where ours differs from the reference's
OFFSET_ON_FAILURE = (
    "a failed or not_found visit leaves next_position_offset as it is (visits/feedback.py); "
    "the reference's journal client adds 1 when the origin was visited before"
)
OFFSET_ON_FIRST_VISIT = (
    "an origin's first visit moves next_position_offset (eventful: -2, from 4 to 2); the "
    "reference's journal client leaves the first visit's offset at 4"
)


def snap(digit: str) -> bytes:
    return bytes.fromhex(digit * 40)


def status(origin: str, visit: int, state: str, date: datetime, **more: Any) -> dict[str, Any]:
    """A visit status as the archive's journal carries it (``type`` given
    unless ``more`` drops it)."""
    body = {"origin": origin, "visit": visit, "status": state, "date": date, "type": "git"}
    body.update({"snapshot": None, **more})
    return {k: v for k, v in body.items() if v is not DROP}


DROP = object()


def play(store: SQLAlchemyStore, *statuses: dict[str, Any]) -> JournalStep:
    """``statuses`` as one batch of the journal, through our journal client."""
    values = [msgpack.packb(s, use_bin_type=True, datetime=True) for s in statuses]
    consumer = Recorded(values)
    done = journal_step(store, consumer, batch=len(values) + 1)
    assert consumer.committed == len(values)
    return done


def stats_of(store: SQLAlchemyStore, url: str, visit_type: str = "git") -> OriginVisitStats:
    [found] = store.origin_visit_stats_get([(url, visit_type)])
    return found


def seen(found: OriginVisitStats) -> dict[str, Any]:
    """The fields the reference's cases compare (its queue position aside)."""
    return {
        "last_visit": found.last_visit,
        "last_visit_status": found.last_visit_status,
        "last_successful": found.last_successful,
        "last_snapshot": found.last_snapshot,
        "successive_visits": found.successive_visits,
    }


def expected(
    last_visit: datetime,
    status: LastVisitStatus,
    *,
    successful: datetime | None = None,
    snapshot: bytes | None = None,
    successive: int = 1,
) -> dict[str, Any]:
    return {
        "last_visit": last_visit,
        "last_visit_status": status,
        "last_successful": successful,
        "last_snapshot": None if snapshot is None else snapshot.hex(),
        "successive_visits": successive,
    }


def our_offset(found: int, ours: int, reference: int, difference: str) -> None:
    """``found`` is our documented rule's value, which differs from the
    reference's (docs/visits.md, "Beside the reference")."""
    assert ours != reference, "the rules agree here: assert the value directly"
    assert found == ours, f"next_position_offset {found}, ours {ours} ({difference})"


def test_a_message_that_is_no_visit_status_is_skipped_not_applied(
    store: SQLAlchemyStore,
) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_from_journal_fail
    # The reference raises on an origin_visit object (or nothing); ours reads one
    # topic and skips what is no visit status (docs/visits.md)
    done = play(store, {"url": FOO}, {})
    assert (done.received, done.changed, done.unreadable) == (2, 0, 2)
    assert store.origin_visit_stats_get([(FOO, "git")]) == []


def test_unfinished_statuses_write_nothing(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_from_journal_ignored_status  # noqa: E501
    done = play(
        store,
        status(FOO, 1, "created", DATE3),
        status(BAR, 1, "ongoing", DATE3, type="svn"),
    )
    assert (done.changed, done.ignored) == (0, 2)
    assert store.origin_visit_stats_get([(FOO, "git"), (BAR, "svn")]) == []


def test_a_status_without_its_visit_type_is_skipped(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_ignore_missing_type
    done = play(store, status(FOO, 1, "full", DATE3, snapshot=snap("d"), type=DROP))
    assert (done.changed, done.unreadable) == (0, 1)
    assert store.origin_visit_stats_get([(FOO, "git")]) == []


def test_not_found_visits_in_a_row_are_counted(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_from_journal_last_not_found  # noqa: E501
    play(store, status(FOO, 1, "not_found", DATE1))
    first = stats_of(store, FOO)
    assert seen(first) == expected(DATE1, LastVisitStatus.NOT_FOUND)
    assert first.next_position_offset == 4
    play(store, status(FOO, 3, "not_found", DATE2), status(FOO, 4, "not_found", DATE3))
    found = stats_of(store, FOO)
    assert seen(found) == expected(DATE3, LastVisitStatus.NOT_FOUND, successive=3)
    our_offset(found.next_position_offset, 4, 6, OFFSET_ON_FAILURE)


def test_full_visits_without_a_snapshot_are_failures(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_from_journal_last_failed  # noqa: E501
    play(
        store,
        status(FOO, 1, "partial", datetime.now(UTC)),
        status(BAR, 1, "full", DATE1),
        status(BAR, 2, "full", DATE2),
        status(BAR, 3, "full", DATE3),
    )
    found = stats_of(store, BAR)
    assert seen(found) == expected(DATE3, LastVisitStatus.FAILED, successive=3)
    our_offset(found.next_position_offset, 4, 6, OFFSET_ON_FAILURE)


def test_failed_visits_with_or_without_a_snapshot_are_failures(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_from_journal_last_failed2  # noqa: E501
    play(
        store,
        status(BAR, 2, "failed", DATE1, snapshot=snap("d")),
        status(BAR, 3, "failed", DATE2),
    )
    found = stats_of(store, BAR)
    assert seen(found) == expected(DATE2, LastVisitStatus.FAILED, successive=2)
    our_offset(found.next_position_offset, 4, 5, OFFSET_ON_FAILURE)


def test_eventful_visits_in_a_row_bring_the_offset_to_zero(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_from_journal_last_successful  # noqa: E501
    play(
        store,
        status(BAR, 1, "partial", datetime.now(UTC), snapshot=snap("d")),
        status(FOO, 1, "full", DATE1, snapshot=snap("e")),
        status(FOO, 2, "partial", DATE2, snapshot=snap("a")),
        status(FOO, 3, "full", DATE3, snapshot=snap("c")),
    )
    found = stats_of(store, FOO)
    assert seen(found) == expected(
        DATE3, LastVisitStatus.SUCCESSFUL, successful=DATE3, snapshot=snap("c"), successive=3
    )
    assert found.next_position_offset == 0


def test_an_uneventful_success_after_a_failure_pushes_the_offset(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_from_journal_last_uneventful  # noqa: E501
    same = snap("d")
    store.origin_visit_stats_upsert([
        OriginVisitStats(url=FOO, visit_type="git", last_successful=DATE2, last_visit=DATE3,
                         last_visit_status=LastVisitStatus.FAILED, last_snapshot=same.hex(),
                         next_position_offset=4, successive_visits=1)
    ])  # fmt: skip
    play(store, status(FOO, 1, "full", DATE3 + DAY, snapshot=same))
    found = stats_of(store, FOO)
    assert seen(found) == expected(
        DATE3 + DAY, LastVisitStatus.SUCCESSFUL, successful=DATE3 + DAY, snapshot=same
    )
    assert found.next_position_offset == 5


def _orders(store: SQLAlchemyStore, statuses: list[dict[str, Any]], name: str) -> list[Any]:
    """Every order of ``statuses``, each played on an origin of its own:
    the stats each order left."""
    found = []
    for n, order in enumerate(itertools.permutations(statuses)):
        url = f"https://perm{n}.example/{name}"
        play(store, *({**s, "origin": url} for s in order))
        found.append(stats_of(store, url, statuses[0]["type"]))
    return found


def test_any_order_of_two_visits_ends_in_the_same_dates(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_permutation0
    day = [DATE1 + n * DAY for n in range(4)]
    same = snap("d")
    statuses = [
        status(FOO, 1, "created", day[0], snapshot=same),
        status(FOO, 1, "full", day[1], snapshot=same),
        status(FOO, 2, "created", day[2], snapshot=same),
        status(FOO, 2, "full", day[3], snapshot=same),
    ]
    every = _orders(store, statuses, "p0")
    for found in every:
        assert {k: v for k, v in seen(found).items() if k != "successive_visits"} == {
            k: v
            for k, v in expected(
                day[3], LastVisitStatus.SUCCESSFUL, successful=day[3], snapshot=same
            ).items()
            if k != "successive_visits"
        }
        assert 1 <= found.successive_visits <= 2
    offsets = {found.next_position_offset for found in every}
    # ours applies a batch in date order: one result (2 -> 3); the reference 4..5
    assert len(offsets) == 1, offsets
    our_offset(offsets.pop(), 3, 5, OFFSET_ON_FIRST_VISIT)


def test_any_order_of_four_visits_ends_in_the_same_dates(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_permutation1
    day = [DATE1 + n * DAY for n in range(4)]
    one, two = snap("d"), snap("a")
    statuses = [
        status(CAVA, 1, "partial", day[0], snapshot=one, type="hg"),
        status(CAVA, 2, "full", day[1], snapshot=one, type="hg"),
        status(CAVA, 3, "full", day[2], snapshot=two, type="hg"),
        status(CAVA, 4, "full", day[3], snapshot=two, type="hg"),
    ]
    for found in _orders(store, statuses, "p1"):
        assert {**seen(found), "successive_visits": 0} == {
            **expected(day[3], LastVisitStatus.SUCCESSFUL, successful=day[3], snapshot=two),
            "successive_visits": 0,
        }
        assert 2 <= found.next_position_offset <= 5
        assert 1 <= found.successive_visits <= 4


def test_statuses_after_a_grab_keep_what_the_grab_wrote(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_after_grab_next_visits  # noqa: E501
    lister = store.get_or_create_lister("cgit", "example")
    pairs = [(CAVA, "hg"), (ICI, "hg"), (CAVA, "git"), (ICI, "git")]
    for visit_type in ("hg", "git"):
        store.create_task_type(_task_type(visit_type))
    store.record_listed_origins([ListedOrigin(lister.id, url, vt) for url, vt in pairs])
    before = datetime.now(UTC)
    store.grab_next_visits("git", 10, "oldest_scheduled_first")
    after = datetime.now(UTC)
    assert store.origin_visit_stats_get([(CAVA, "hg")]) == []
    assert stats_of(store, CAVA, "git").last_scheduled is not None
    snapshots = iter("01234567")
    statuses = [
        status(url, visit, "full", DATE1 + n * DAY, snapshot=snap(next(snapshots)), type=vt)
        for n, ((url, vt), visit) in enumerate(
            (pair, visit) for pair in [(CAVA, "hg"), (ICI, "hg"), (CAVA, "git"), (ICI, "git")]
            for visit in (1, 2)
        )
    ]  # fmt: skip
    play(store, *statuses)
    for url in (CAVA, ICI):
        assert before <= stats_of(store, url, "git").last_scheduled <= after
        assert stats_of(store, url, "hg").last_scheduled is None
    found = stats_of(store, CAVA, "git")
    assert seen(found) == expected(
        DATE1 + 5 * DAY,
        LastVisitStatus.SUCCESSFUL,
        successful=DATE1 + 5 * DAY,
        snapshot=snap("5"),
        successive=2,
    )


def _task_type(visit_type: str) -> TaskType:
    """What makes ``visit_type`` known here (docs/howto/origin-visits.md)."""
    return TaskType(type=f"load-{visit_type}", backend_name=f"loaders.{visit_type}")


def test_a_message_delivered_twice_counts_once(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_duplicated_messages
    message = status(FOO, 1, "full", DATE1, snapshot=snap("a"))
    play(store, message)
    again = play(store, message)
    assert (again.changed, again.ignored) == (0, 1)
    found = stats_of(store, FOO)
    assert seen(found) == expected(
        DATE1, LastVisitStatus.SUCCESSFUL, successful=DATE1, snapshot=snap("a")
    )
    our_offset(found.next_position_offset, 2, 4, OFFSET_ON_FIRST_VISIT)


def test_an_older_message_after_a_newer_one_changes_nothing(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_status_several_upsert
    play(store, status(FOO, 1, "full", DATE2, snapshot=snap("a")))
    late = play(store, status(FOO, 1, "full", DATE1, snapshot=snap("a")))
    assert (late.changed, late.ignored) == (0, 1)
    found = stats_of(store, FOO)
    assert seen(found) == expected(
        DATE2, LastVisitStatus.SUCCESSFUL, successful=DATE2, snapshot=snap("a")
    )
    our_offset(found.next_position_offset, 2, 4, OFFSET_ON_FIRST_VISIT)


def test_any_order_of_one_snapshot_seen_again_ends_in_the_same_dates(
    store: SQLAlchemyStore,
) -> None:
    # reference: test_journal_client.py::test_journal_client_origin_visit_statuses_same_snapshot_permutation  # noqa: E501
    same = snap("a")
    statuses = [
        status(CAVA, 3, "full", DATE1, snapshot=same, type="hg"),
        status(CAVA, 4, "full", DATE1 + YEAR, snapshot=same, type="hg"),
        status(CAVA, 4, "full", DATE1 + 2 * YEAR, snapshot=same, type="hg"),
    ]
    last = DATE1 + 2 * YEAR
    for found in _orders(store, statuses, "same"):
        assert {**seen(found), "successive_visits": 0} == {
            **expected(last, LastVisitStatus.SUCCESSFUL, successful=last, snapshot=same),
            "successive_visits": 0,
        }
        assert 4 <= found.next_position_offset <= 6
        assert 1 <= found.successive_visits <= 3


def test_the_interval_is_two_to_the_offset_hours_up_to_offset_ten() -> None:
    # reference: test_journal_client.py::test_journal_client_from_position_offset_to_days
    # Divergence, docs/visits.md ("its interval is 2^offset hours
    # (16 h at first, about 43 days at most)"): the reference's is 1, 2 or
    # 4^(offset-4) days, unbounded
    assert [interval(n) for n in (0, 1, 4, 10, 11, 30)] == [
        timedelta(hours=h) for h in (1, 2, 16, 1024, 1024, 1024)
    ]


@pytest.mark.parametrize("offset", [1, 3, 4, 7, 8])
def test_the_next_position_is_the_queue_s_plus_the_interval(offset: int) -> None:
    # reference: test_journal_client.py::test_next_visit_queue_position,
    # ::test_next_visit_queue_position_with_state and
    # ::test_next_visit_queue_position_with_next_visit_queue (their offsets).
    # Divergence, docs/howto/http-api.md (positions are instants here, seconds
    # there) and docs/visits.md (2^offset hours): the position is
    # the queue's (the visit's date before the queue ever moved) plus the
    # interval, with no random fudge of +-10 %
    before = OriginVisitStats(
        url=FOO, visit_type="svn", last_visit=DATE1, next_position_offset=offset + 1
    )
    uneventful = VisitStatusMessage(FOO, "svn", DATE2, "full", snap("a").hex())
    after_date = apply_status(
        OriginVisitStats(**{**vars(before), "last_snapshot": snap("a").hex()}), uneventful
    )
    assert after_date is not None and after_date.next_position_offset == offset + 2
    assert after_date.next_visit_queue_position == DATE2 + interval(offset + 2)
    queue = DATE1 - YEAR
    failed = VisitStatusMessage(FOO, "svn", DATE2, "failed")
    after_queue = apply_status(before, failed, queue_position=queue)
    assert after_queue is not None
    assert after_queue.next_visit_queue_position == queue + interval(offset + 1)


def test_an_origin_failing_three_times_in_a_row_is_disabled(store: SQLAlchemyStore) -> None:
    # reference: test_journal_client.py::test_disable_failing_origins
    store.create_task_type(_task_type("svn"))
    lister = store.get_or_create_lister("something", "something")
    store.record_listed_origins([ListedOrigin(lister.id, BAR, "svn")])
    play(
        store,
        status(BAR, 2, "failed", DATE1, type="svn"),
        status(BAR, 3, "failed", DATE2, type="svn"),
        status(BAR, 3, "failed", DATE3, type="svn"),
    )
    found = stats_of(store, BAR, "svn")
    assert seen(found) == expected(DATE3, LastVisitStatus.FAILED, successive=3)
    page = store.get_listed_origins(url=BAR, enabled=False)
    assert page.next_page_token is None
    assert [(o.lister_id, o.url, o.visit_type, o.enabled) for o in page.origins] == [
        (lister.id, BAR, "svn", False)
    ]
    our_offset(found.next_position_offset, 4, 6, OFFSET_ON_FAILURE)
