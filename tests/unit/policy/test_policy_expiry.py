"""One-shot expiry: a pass with room counts only if it began after the task
could be claimed (policy.expiry, pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from policy_helpers import MIN, T0, at, make_task

from swh_like_scheduler.domain.model import ScheduleKind, Task
from swh_like_scheduler.policy import claimable_from, may_expire

S = timedelta(seconds=1)
GRACE = 5 * MIN


def late_oneshot(**changes: object) -> Task:
    """Requested for T0, max_delay 1 s, created long before."""
    values: dict[str, object] = {
        "next_run": T0,
        "deadline": T0 + S,
        "max_delay": S,
        "created_at": at(-2),
        "updated_at": at(-2),
    }
    values.update(changes)
    return make_task(ScheduleKind.ONESHOT, **values)


def test_the_deadline_plus_grace_decides_for_a_task_written_long_before() -> None:
    task = late_oneshot()
    assert claimable_from(task, T0 + S, GRACE) == T0 + S + GRACE
    now = at(1)
    assert not may_expire(task, T0 + S, GRACE, T0 + S + GRACE, now)
    assert may_expire(task, T0 + S, GRACE, T0 + S + GRACE + S, now)
    assert not may_expire(task, T0 + S, GRACE, None, now)


def test_a_task_created_late_needs_a_pass_begun_after_its_creation() -> None:
    created = at(1)  # an hour after its should_start_by
    task = late_oneshot(created_at=created, updated_at=created)
    assert claimable_from(task, T0 + S, GRACE) == created
    now = created + MIN
    assert not may_expire(task, T0 + S, GRACE, created - 9 * S, now)
    assert not may_expire(task, T0 + S, GRACE, created, now)
    assert may_expire(task, T0 + S, GRACE, created + S, now)


def test_a_task_written_again_needs_a_pass_begun_after_that_write() -> None:
    enabled = at(1)  # created long ago, enabled again an hour late
    task = late_oneshot(updated_at=enabled)
    assert claimable_from(task, T0 + S, GRACE) == enabled
    assert not may_expire(task, T0 + S, GRACE, enabled - S, at(2))
    assert may_expire(task, T0 + S, GRACE, enabled + S, at(2))


def test_a_task_ready_later_than_its_deadline_needs_a_pass_begun_after_it_was_ready() -> None:
    ready = at(1)  # put back to the end of a blackout window
    task = late_oneshot(next_run=ready)
    assert claimable_from(task, T0 + S, GRACE) == ready
    assert not may_expire(task, T0 + S, GRACE, ready - S, at(2))


def test_nothing_expires_before_its_deadline_plus_grace_whatever_the_room() -> None:
    task = late_oneshot()
    now = T0 + S + GRACE  # not past yet
    assert not may_expire(task, T0 + S, GRACE, now + MIN, now)


@given(
    created=st.integers(min_value=-7200, max_value=7200),
    written=st.integers(min_value=0, max_value=7200),
    room=st.integers(min_value=-7200, max_value=14400),
)
def test_a_pass_begun_before_any_of_the_instants_never_counts(
    created: int, written: int, room: int
) -> None:
    made = T0 + timedelta(seconds=created)
    task = late_oneshot(created_at=made, updated_at=made + timedelta(seconds=written))
    began = T0 + timedelta(seconds=room)
    now = T0 + 10 * timedelta(hours=1)
    expires = may_expire(task, T0 + S, GRACE, began, now)
    latest = max(made + timedelta(seconds=written), T0 + S + GRACE)
    assert expires == (began > latest)


def test_naive_instants_are_refused() -> None:
    task = late_oneshot()
    with pytest.raises(ValueError, match="naive"):
        may_expire(task, T0 + S, GRACE, T0.replace(tzinfo=None), at(1))
