"""The default cooldown of a periodic task: about one run per period on an
idle platform, a tenth of the period between may-start and should-start."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from policy_helpers import DAY, HOUR, MIN, T0, make_task, make_type

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind
from swh_like_scheduler.policy import (
    PERIODIC_WINDOW,
    Condition,
    condition,
    default_cooldown,
    start_times,
    with_default_cooldown,
)

SECOND = timedelta(seconds=1)


def test_the_rule() -> None:
    assert default_cooldown(HOUR) == 54 * MIN
    assert default_cooldown(5 * SECOND) == timedelta(seconds=4.5)
    # twice the expected duration comes off
    assert default_cooldown(HOUR, 5 * MIN) == 44 * MIN
    # never below 0
    assert default_cooldown(HOUR, 30 * MIN) == timedelta(0)
    with pytest.raises(InvalidInput) as caught:
        default_cooldown(timedelta(0))
    assert caught.value.field == "period"


def test_only_a_periodic_task_without_a_cooldown_gets_it() -> None:
    assert with_default_cooldown(make_task(period=HOUR)).cooldown == 54 * MIN
    assert with_default_cooldown(make_task(period=HOUR, cooldown=timedelta(0))).cooldown == (
        timedelta(0)
    )
    assert with_default_cooldown(make_task(period=HOUR, cooldown=MIN)).cooldown == MIN
    expected = make_task(period=HOUR, expected_duration=10 * MIN)
    assert with_default_cooldown(expected).cooldown == 34 * MIN
    for kind in (ScheduleKind.ADAPTIVE, ScheduleKind.CRON, ScheduleKind.ONESHOT):
        assert with_default_cooldown(make_task(kind)).cooldown is None


@given(
    period=st.integers(min_value=10, max_value=30 * 86_400).map(lambda s: s * SECOND),
    share=st.floats(min_value=0.0, max_value=0.449),
)
def test_runs_about_once_per_period_with_room_before_the_deadline(
    period: timedelta, share: float
) -> None:
    """A run that lasted the expected duration e makes the next one
    may-start at start + 0.9 period - e and should-start at start + period - e."""
    duration = timedelta(seconds=round(period.total_seconds() * share))
    # rounded to the second, a short period's run may outgrow the share: the
    # cooldown is then 0 (never negative) and the room is more than a tenth
    assume(2 * duration <= period * (1 - PERIODIC_WINDOW))
    task_type = make_type()
    task = with_default_cooldown(make_task(period=period, expected_duration=duration))
    start = T0 + DAY
    ran = task.updated(
        last_good_start_at=start,
        last_good_end_at=start + duration,
        last_start_at=start,
        last_end_at=start + duration,
        average_good_duration=duration,
    )
    times = start_times(ran, task_type, start + duration)
    assert times.should_start_by == start + period - duration
    room = times.should_start_by - times.can_start_by
    assert abs(room - period * PERIODIC_WINDOW) <= timedelta(microseconds=2)
    # started when it may, it is OK all along its run
    report = condition(ran, task_type, times.can_start_by)
    assert report.level is Condition.OK, report


def test_without_a_cooldown_it_may_run_again_at_once() -> None:
    """What the default replaces: a cooldown of 0 (asked for explicitly)."""
    start = T0 + DAY
    task = make_task(period=HOUR, cooldown=timedelta(0)).updated(
        last_good_start_at=start,
        last_good_end_at=start + SECOND,
        last_start_at=start,
        last_end_at=start + SECOND,
    )
    assert start_times(task, make_type(), start + SECOND).can_start_by == start + SECOND
    defaulted = with_default_cooldown(task.updated(cooldown=None))
    assert start_times(defaulted, make_type(), start).can_start_by == start + SECOND + 54 * MIN
