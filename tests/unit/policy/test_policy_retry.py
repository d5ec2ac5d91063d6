"""Retry delays, retry position and the retry budget."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import DAY, HOUR, MIN, adaptive_type, make_task, make_type

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind
from swh_like_scheduler.policy import (
    check_retry_budget,
    retry_base_delay,
    retry_delay,
    retry_state,
    worst_case_retry_sum,
)
from swh_like_scheduler.policy.retry import draw


def test_defaults_give_5_min_1_hour_then_4_hours() -> None:
    task_type = make_type(num_retries=5)
    assert [retry_base_delay(task_type, n) for n in range(1, 6)] == [
        5 * MIN,
        HOUR,
        4 * HOUR,
        4 * HOUR,
        4 * HOUR,
    ]


def test_jitter_adds_a_fraction_of_retry_jitter() -> None:
    task_type = make_type(num_retries=2, retry_jitter=timedelta(seconds=100))
    assert retry_delay(task_type, 1, 0.0) == 5 * MIN
    assert retry_delay(task_type, 1, 0.5) == 5 * MIN + timedelta(seconds=50)
    assert retry_delay(task_type, 1, 1.0) == 5 * MIN + timedelta(seconds=100)
    with pytest.raises(ValueError):
        retry_delay(task_type, 1, 1.5)


def test_huge_retry_numbers_stay_at_the_cap() -> None:
    assert retry_base_delay(make_type(), 10_000) == 4 * HOUR


def test_draw_accepts_random_objects_and_callables() -> None:
    import random

    assert 0.0 <= draw(random.Random(3)) <= 1.0
    assert draw(lambda: 0.25) == 0.25
    with pytest.raises(ValueError):
        draw(lambda: 2.0)


def test_worst_case_sum_includes_jitter_each_time() -> None:
    task_type = make_type(num_retries=3, retry_jitter=10 * MIN)
    assert worst_case_retry_sum(task_type) == 5 * MIN + HOUR + 4 * HOUR + 3 * 10 * MIN
    assert worst_case_retry_sum(make_type(num_retries=None)) == timedelta(0)


class TestRetryState:
    def test_no_failure(self) -> None:
        state = retry_state(make_task(), make_type(num_retries=2))
        assert (state.retry, state.exhausted, state.retries_left) == (None, False, 2)

    def test_oneshot_retries_then_exhausts(self) -> None:
        task_type = make_type(num_retries=2)
        got = [
            retry_state(make_task(ScheduleKind.ONESHOT, failure_count=f), task_type)
            for f in (1, 2, 3, 4)
        ]
        assert [(s.retry, s.exhausted, s.retries_left) for s in got] == [
            (1, False, 1),
            (2, False, 0),
            (None, True, 0),
            (None, True, 0),
        ]

    def test_recurring_cycles(self) -> None:
        task_type = make_type(num_retries=2)
        got = [retry_state(make_task(failure_count=f), task_type) for f in range(1, 8)]
        assert [s.retry for s in got] == [1, 2, None, 1, 2, None, 1]
        assert [s.exhausted for s in got] == [False, False, True, False, False, True, False]

    def test_no_retries_means_exhausted_at_once(self) -> None:
        state = retry_state(make_task(failure_count=1), make_type(num_retries=None))
        assert state.exhausted and state.retry is None


class TestBudget:
    def test_periodic_refused_with_a_message_that_says_so(self) -> None:
        task_type = make_type(num_retries=3)  # 5m + 1h + 4h = 5h05
        with pytest.raises(InvalidInput) as caught:
            check_retry_budget(make_task(period=4 * HOUR), task_type)
        assert caught.value.field == "period"
        message = caught.value.message
        assert "worst-case retry" in message and "5h05m" in message and "4h" in message
        check_retry_budget(make_task(period=6 * HOUR), task_type)

    def test_exactly_equal_is_accepted(self) -> None:
        task_type = make_type(num_retries=3)
        check_retry_budget(make_task(period=5 * HOUR + 5 * MIN), task_type)

    def test_jitter_counts(self) -> None:
        task_type = make_type(num_retries=3, retry_jitter=20 * MIN)
        with pytest.raises(InvalidInput, match="jitter"):
            check_retry_budget(make_task(period=6 * HOUR), task_type)

    def test_adaptive_uses_min_interval(self) -> None:
        task_type = adaptive_type(num_retries=3, min_interval=4 * HOUR)
        with pytest.raises(InvalidInput) as caught:
            check_retry_budget(make_task(ScheduleKind.ADAPTIVE, current_interval=DAY), task_type)
        # the type's setting is at fault, not the interval the user gave
        assert caught.value.field == "min_interval"
        assert "whatever their interval" in caught.value.message
        assert "task-type update load-git" in caught.value.message

    def test_adaptive_without_min_uses_current_interval(self) -> None:
        task_type = make_type(num_retries=3, default_interval=DAY)
        check_retry_budget(make_task(ScheduleKind.ADAPTIVE, current_interval=DAY), task_type)
        with pytest.raises(InvalidInput):
            check_retry_budget(
                make_task(ScheduleKind.ADAPTIVE, current_interval=2 * HOUR), task_type
            )

    def test_cron_uses_the_shortest_gap(self) -> None:
        task_type = make_type(num_retries=2)  # 1h05
        # fires at 00:00 and 01:00 each day: shortest gap 1 h
        task = make_task(ScheduleKind.CRON, cron="0 0,1 * * *")
        with pytest.raises(InvalidInput) as caught:
            check_retry_budget(task, task_type)
        assert caught.value.field == "cron"
        check_retry_budget(make_task(ScheduleKind.CRON, cron="0 0,12 * * *"), task_type)

    def test_oneshot_and_no_retries_are_never_refused(self) -> None:
        check_retry_budget(make_task(ScheduleKind.ONESHOT), make_type(num_retries=50))
        check_retry_budget(make_task(period=MIN), make_type(num_retries=None))


@settings(max_examples=100, deadline=None)
@given(
    delay=st.integers(1, 3600),
    growth=st.floats(1.0, 20.0, allow_nan=False),
    cap=st.integers(1, 86_400),
    jitter=st.integers(0, 600),
    fraction=st.floats(0.0, 1.0),
)
def test_delays_are_non_decreasing_up_to_the_cap(
    delay: int, growth: float, cap: int, jitter: int, fraction: float
) -> None:
    task_type = make_type(
        num_retries=12,
        retry_delay=timedelta(seconds=delay),
        retry_growth=growth,
        retry_cap=timedelta(seconds=cap),
        retry_jitter=timedelta(seconds=jitter),
    )
    bases = [retry_base_delay(task_type, n) for n in range(1, 13)]
    for earlier, later in itertools.pairwise(bases):
        assert earlier <= later
    assert all(b <= timedelta(seconds=cap) for b in bases)
    assert bases[0] == timedelta(seconds=min(delay, cap))
    for n, base in enumerate(bases, start=1):
        jittered = retry_delay(task_type, n, fraction)
        assert base <= jittered <= base + timedelta(seconds=jitter)
