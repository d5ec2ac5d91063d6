"""What a visit's status does to its origin's statistics (visits/feedback.py),
per status, and the properties every feed relies on: a stream applied
twice is applied once; the order within a batch does not matter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.visits.feedback import (
    MAX_OFFSET,
    VisitStatusMessage,
    apply_status,
    fold,
    interval,
)
from swh_like_scheduler.visits.model import (
    DEFAULT_OFFSET,
    LastVisitStatus,
    ListedOrigin,
    Lister,
    OriginVisitStats,
    VisitStatus,
)

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
H = timedelta(hours=1)
URL = "https://forge.example/a"
A, B = "a" * 40, "b" * 40


def msg(hours: float, status: str, snapshot: str | None = None) -> VisitStatusMessage:
    return VisitStatusMessage(URL, "git", T0 + hours * H, VisitStatus(status), snapshot)


def test_an_unfinished_visit_changes_nothing() -> None:
    assert apply_status(None, msg(0, "created")) is None
    assert apply_status(None, msg(0, "ongoing")) is None


def test_a_first_success_is_eventful_and_brings_the_origin_nearer() -> None:
    stats = apply_status(None, msg(0, "full", A))
    assert stats is not None
    assert stats.last_visit_status is LastVisitStatus.SUCCESSFUL
    assert (stats.last_visit, stats.last_successful, stats.last_snapshot) == (T0, T0, A)
    assert stats.next_position_offset == DEFAULT_OFFSET - 2
    assert stats.next_visit_queue_position == T0 + interval(DEFAULT_OFFSET - 2)


def test_the_same_snapshot_again_is_uneventful_and_pushes_it_further() -> None:
    first = apply_status(None, msg(0, "full", A))
    second = apply_status(first, msg(5, "partial", A))
    assert second is not None and first is not None
    assert second.next_position_offset == first.next_position_offset + 1
    assert second.successive_visits == 2 and second.last_successful == T0 + 5 * H
    third = apply_status(second, msg(9, "full", B))
    assert third is not None and third.next_position_offset == second.next_position_offset - 2


def test_the_offset_stays_between_0_and_its_largest() -> None:
    stats: OriginVisitStats | None = None
    for n in range(20):
        stats = apply_status(stats, msg(n, "full", A))
    assert stats is not None and stats.next_position_offset == MAX_OFFSET
    for n, snap in enumerate([f"{k:040x}" for k in range(1, 10)]):
        stats = apply_status(stats, msg(30 + n, "full", snap))
    assert stats is not None and stats.next_position_offset == 0


@pytest.mark.parametrize(
    ("status", "snapshot", "outcome"),
    [
        ("failed", None, LastVisitStatus.FAILED),
        ("not_found", None, LastVisitStatus.NOT_FOUND),
        ("full", None, LastVisitStatus.FAILED),  # full, yet loaded nothing
        ("partial", None, LastVisitStatus.FAILED),
    ],
)
def test_failures_keep_the_last_success_and_the_offset(
    status: str, snapshot: str | None, outcome: LastVisitStatus
) -> None:
    good = apply_status(None, msg(0, "full", A))
    after = apply_status(good, msg(1, status, snapshot))
    assert good is not None and after is not None
    assert after.last_visit_status is outcome and after.last_visit == T0 + H
    assert (after.last_successful, after.last_snapshot) == (T0, A)
    assert after.next_position_offset == good.next_position_offset
    again = apply_status(after, msg(2, status, snapshot))
    assert again is not None and again.successive_visits == 2


def test_an_older_or_repeated_message_changes_nothing() -> None:
    stats = apply_status(None, msg(5, "full", A))
    assert apply_status(stats, msg(5, "full", A)) is None
    assert apply_status(stats, msg(4, "failed")) is None


def test_the_queue_position_counts_from_the_queue_not_the_clock() -> None:
    ahead = apply_status(None, msg(0, "failed"), queue_position=T0 + 100 * H)
    behind = apply_status(None, msg(0, "failed"), queue_position=T0 - 100 * H)
    unmoved = apply_status(None, msg(0, "failed"))
    assert ahead is not None and behind is not None and unmoved is not None
    assert ahead.next_visit_queue_position == T0 + 100 * H + interval(DEFAULT_OFFSET)
    assert behind.next_visit_queue_position == T0 - 100 * H + interval(DEFAULT_OFFSET)
    assert unmoved.next_visit_queue_position == T0 + interval(DEFAULT_OFFSET)


STATUSES = st.sampled_from(list(VisitStatus))
SNAPS = st.sampled_from([None, A, B])
MESSAGES = st.lists(st.builds(msg, st.integers(0, 50), STATUSES.map(str), SNAPS), max_size=15).map(
    lambda ms: list({m.date: m for m in ms}.values())
)  # one status per instant


@given(MESSAGES, st.randoms())
@settings(max_examples=200, deadline=None)
def test_a_batch_in_any_order_and_twice_ends_in_one_state(
    messages: list[VisitStatusMessage], rng: object
) -> None:
    once = fold(None, messages)
    shuffled = list(messages)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert fold(None, shuffled) == once
    assert fold(once, messages) is None  # nothing newer than what it holds


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: VisitStatusMessage("nope", "git", T0, VisitStatus.FULL), "origin"),
        (lambda: VisitStatusMessage(URL, "git", T0.replace(tzinfo=None), "full"), "date"),
        (lambda: VisitStatusMessage(URL, "git", T0, "done"), "status"),  # type: ignore[arg-type]
        (lambda: VisitStatusMessage(URL, "git", T0, "full", "xyz"), "snapshot"),  # type: ignore[arg-type]
        (lambda: VisitStatusMessage(URL, "git", None, "full"), "date"),  # type: ignore[arg-type]
        (lambda: Lister(name="x", current_state=[1]), "current_state"),  # type: ignore[arg-type]
        (lambda: ListedOrigin("l", URL, "git", enabled="yes"), "enabled"),  # type: ignore[arg-type]
        (lambda: ListedOrigin("l", URL, "git", forked_from_url="x"), "forked_from_url"),
        (lambda: OriginVisitStats(URL, "git", last_visit_status="ok"), "last_visit_status"),  # type: ignore[arg-type]
        (lambda: OriginVisitStats(URL, "git", next_position_offset=-1), "next_position_offset"),
    ],
)
def test_bad_values_are_refused_by_field(make: object, field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        make()  # type: ignore[operator]
    assert refused.value.field == field


def test_a_snapshot_id_is_read_in_its_usual_spellings() -> None:
    raw = bytes(range(20))
    for spelling in (raw, raw.hex().upper(), f"swh:1:snp:{raw.hex()}"):
        assert VisitStatusMessage(URL, "git", T0, VisitStatus.FULL, spelling).snapshot == raw.hex()  # type: ignore[arg-type]


def test_a_workers_own_verdict_counts_with_or_without_a_snapshot() -> None:
    first = apply_status(None, msg(0, "full", A))
    same = VisitStatusMessage(URL, "git", T0 + H, VisitStatus.FULL, None, eventful=False)
    after = apply_status(first, same)
    assert first is not None and after is not None
    assert after.last_visit_status is LastVisitStatus.SUCCESSFUL and after.last_snapshot == A
    assert after.next_position_offset == first.next_position_offset + 1
    changed = VisitStatusMessage(URL, "git", T0 + 2 * H, VisitStatus.FULL, A, eventful=True)
    later = apply_status(after, changed)  # the same snapshot id, yet the loader saw a change
    assert later is not None and later.next_position_offset == after.next_position_offset - 2
    with pytest.raises(InvalidInput) as refused:
        VisitStatusMessage(URL, "git", T0, VisitStatus.FULL, None, eventful="yes")  # type: ignore[arg-type]
    assert refused.value.field == "eventful"


def test_the_condition_of_an_origin() -> None:
    from swh_like_scheduler.policy.condition import Condition
    from swh_like_scheduler.visits.condition import VisitReason, visit_condition

    origin = ListedOrigin("l", URL, "git", first_seen=T0, last_seen=T0)
    never = visit_condition(origin, None, T0 + 10 * H)
    assert never is not None and (never.level, never.reason) == (
        Condition.WARNING,
        VisitReason.NEVER_VISITED,
    )
    assert visit_condition(origin, None, T0 + 17 * H).level is Condition.ERROR  # type: ignore[union-attr]
    visited = apply_status(None, msg(20, "full", A))  # due 4 h later (offset 2)
    fresh = visit_condition(origin, visited, T0 + 23 * H)
    assert fresh is not None and (fresh.level, fresh.reason) == (Condition.OK, VisitReason.FRESH)
    changed = ListedOrigin("l", URL, "git", first_seen=T0, last_seen=T0, last_update=T0 + 21 * H)
    told = visit_condition(changed, visited, T0 + 22 * H)  # the forge changed after the visit
    assert told is not None and (told.level, told.reason) == (
        Condition.WARNING,
        VisitReason.CHANGED_ON_FORGE,
    )
    gone = apply_status(visited, msg(30, "not_found"))
    late = visit_condition(origin, gone, T0 + 300 * H)
    assert late is not None and (late.level, late.reason) == (
        Condition.WARNING,
        VisitReason.NOT_FOUND,
    )
    off = ListedOrigin("l", URL, "git", first_seen=T0, last_seen=T0, enabled=False)
    assert visit_condition(off, None, T0 + 300 * H) is None
