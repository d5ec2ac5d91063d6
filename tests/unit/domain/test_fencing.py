"""The pure parts of self-fencing (:mod:`swh_like_scheduler.domain.fencing`):
the bound a worker derives from the monitor's published settings, how often
it then renews, and a stall seen as a jump of the monotonic clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swh_like_scheduler.domain.fencing import (
    DEFAULT_TERMS,
    LeaseTerms,
    overdue,
    renewal_period,
    self_fence_bound,
    stall_slack,
    stalled_for,
)

S = timedelta(seconds=1)


def test_the_bound_is_three_quarters_of_the_ping_timeout() -> None:
    assert self_fence_bound(30 * S) == 22.5
    assert self_fence_bound(2.5 * S) == 1.875
    assert DEFAULT_TERMS.bound == 22.5  # nothing published: the monitor's defaults
    assert DEFAULT_TERMS.margin == 37.5  # a quarter of the ping timeout, and the grace


@given(
    ping=st.floats(min_value=0.01, max_value=1e6),
    grace=st.floats(min_value=0.001, max_value=1e6),
)
def test_a_copy_fences_itself_strictly_before_the_monitor_may_take_its_run(
    ping: float, grace: float
) -> None:
    terms = LeaseTerms(ping * S, grace * S)
    assert 0 < terms.bound < ping  # before the monitor even puts it on notice
    assert terms.margin > grace  # the grace is left for stop latency and drift


@pytest.mark.parametrize("ping", [timedelta(0), -S])
def test_terms_refuse_a_duration_that_is_not_positive(ping: timedelta) -> None:
    with pytest.raises(ValueError, match="ping_timeout"):
        LeaseTerms(ping, S)
    with pytest.raises(ValueError, match="grace"):
        LeaseTerms(S, ping)
    with pytest.raises(ValueError):
        self_fence_bound(ping)


def test_the_renewal_period_is_the_workers_beat_unless_the_bound_is_short() -> None:
    assert renewal_period(10.0, 22.5) == 10.0  # the defaults: as before
    assert renewal_period(1.0, 1.875) == 0.9375  # a beat too slow for the monitor
    assert renewal_period(0.5, 1.875) == 0.5
    with pytest.raises(ValueError):
        renewal_period(0.0, 1.0)


@given(
    every=st.floats(min_value=0.01, max_value=1e4),
    bound=st.floats(min_value=0.01, max_value=1e4),
)
def test_two_renewal_periods_fit_in_the_bound(every: float, bound: float) -> None:
    period = renewal_period(every, bound)
    assert 0 < period <= every and 2 * period <= bound * (1 + 1e-12)


def test_a_copy_is_overdue_from_its_bound_on() -> None:
    assert not overdue(100.0, 122.4, 22.5)
    assert overdue(100.0, 122.5, 22.5)
    assert overdue(100.0, 160.0, 22.5)


def test_a_wake_up_on_time_or_a_little_late_is_no_stall() -> None:
    assert stalled_for(planned_at=105.0, now=105.0, planned=5.0) == 0.0
    assert stalled_for(planned_at=105.0, now=107.5, planned=5.0) == 0.0  # within the slack
    assert stall_slack(5.0) == 2.5 and stall_slack(0.5) == 1.0


def test_a_wake_up_far_later_than_planned_is_a_stall_of_that_length() -> None:
    # a process stopped 30 s (SIGSTOP) while its heartbeat slept for 5 s
    assert stalled_for(planned_at=105.0, now=135.0, planned=5.0) == 30.0
    # a short sleep: a second late is not a stall yet, two are
    assert stalled_for(planned_at=100.5, now=101.4, planned=0.5) == 0.0
    assert stalled_for(planned_at=100.5, now=102.5, planned=0.5) == 2.0
