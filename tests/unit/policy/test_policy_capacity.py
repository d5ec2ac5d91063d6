"""The capacity-aware adaptive rule (policy/capacity.py): examples and properties.

The properties run the rule on a fleet of always-changing sources in a
model of the platform, round after round: each round the monitor measures
the fleet (demand D = sum of avg / (I + avg); delivered R = what the
workers did, min(D, C) plus whatever backlog they caught up with; backlog
= work asked and not yet done), then every task is visited once and
eventful, and its interval moves by :func:`adapt_interval`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import DAY, HOUR, MIN, T0, adaptive_type, at

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import TypeLoad
from swh_like_scheduler.policy import adapt_interval, next_interval, pressure
from swh_like_scheduler.policy.capacity import HEADROOM, LOAD_MAX_AGE, MARGIN, TOLERANCE

SECONDS = st.floats(min_value=1.0, max_value=90 * 86400.0)


def measured(demand: float, delivered: float, backlog: int, *, age: timedelta = MIN, **kw):  # type: ignore[no-untyped-def]
    return adaptive_type(
        load_demand=demand,
        load_delivered=delivered,
        load_backlog=backlog,
        load_measured_at=T0 - age,
        **kw,
    )


class TestExamples:
    def test_without_a_measurement_the_per_task_rule_applies(self) -> None:
        task_type = adaptive_type()
        for eventful in (True, False):
            assert adapt_interval(
                DAY, task_type, eventful=eventful, gap=DAY + MIN, now=T0
            ) == next_interval(DAY, task_type, eventful=eventful, gap=DAY + MIN)

    def test_a_stale_measurement_steers_nothing(self) -> None:
        task_type = measured(10.0, 1.0, 5, age=LOAD_MAX_AGE + MIN)
        assert pressure(task_type, T0) is None
        assert adapt_interval(2 * DAY, task_type, eventful=True, gap=2 * DAY, now=T0) == DAY

    def test_nothing_delivered_tells_nothing(self) -> None:
        task_type = measured(3.0, 0.0, 7)
        assert pressure(task_type, T0) is None
        assert adapt_interval(2 * DAY, task_type, eventful=True, gap=2 * DAY, now=T0) == DAY

    def test_saturated_and_overloaded_lengthens_in_proportion(self) -> None:
        # asked 1.5 workers, got 1: every visit lengthens by 1.5 x (1 + MARGIN)
        task_type = measured(1.5, 1.0, 12)
        after = adapt_interval(DAY, task_type, eventful=True, gap=DAY + HOUR, now=T0)
        assert after == DAY * 1.5 * (1 + MARGIN)
        # by at most the backoff factor
        assert adapt_interval(DAY, measured(9.0, 1.0, 3), eventful=True, gap=DAY, now=T0) == (
            2 * DAY
        )
        # an uneventful visit lengthens by the factor anyway
        assert adapt_interval(DAY, task_type, eventful=False, gap=DAY, now=T0) == 2 * DAY

    def test_saturated_within_the_tolerance_holds(self) -> None:
        task_type = measured(1.0 + TOLERANCE / 2, 1.0, 4)
        assert adapt_interval(DAY, task_type, eventful=True, gap=DAY + MIN, now=T0) == DAY

    def test_spare_capacity_shrinks_within_the_headroom(self) -> None:
        # nothing overdue, demand = delivered: shrink by 1 + HEADROOM, not by f
        task_type = measured(0.5, 0.5, 0)
        after = adapt_interval(DAY, task_type, eventful=True, gap=DAY + MIN, now=T0)
        assert after == DAY / (1 + HEADROOM)
        # far under what was delivered (retries, other kinds): down to I / f
        assert adapt_interval(DAY, measured(0.1, 1.0, 0), eventful=True, gap=DAY, now=T0) == (
            DAY / 2
        )
        # demand above delivered by more than the headroom: no shrink
        assert adapt_interval(DAY, measured(2.0, 1.0, 0), eventful=True, gap=DAY, now=T0) == DAY
        # a late visit keeps its interval as the per-task rule says
        late = adapt_interval(DAY, measured(0.5, 0.5, 0), eventful=True, gap=3 * DAY, now=T0)
        assert late == DAY

    def test_bounds_hold(self) -> None:
        task_type = measured(0.5, 0.5, 0, min_interval=20 * HOUR)
        assert adapt_interval(DAY, task_type, eventful=True, gap=DAY, now=T0) == 20 * HOUR
        task_type = measured(5.0, 1.0, 1, max_interval=30 * HOUR)
        assert adapt_interval(DAY, task_type, eventful=True, gap=DAY, now=T0) == 30 * HOUR

    def test_measured_fields_are_checked(self) -> None:
        with pytest.raises(InvalidInput, match="load_demand"):
            adaptive_type(load_demand=-1.0)
        with pytest.raises(InvalidInput, match="load_delivered"):
            adaptive_type(load_delivered=float("nan"))
        with pytest.raises(InvalidInput, match="load_backlog"):
            adaptive_type(load_backlog=-2)
        with pytest.raises(InvalidInput, match="load_measured_at"):
            adaptive_type(load_measured_at=T0.replace(tzinfo=None))
        assert adaptive_type(load_demand=1.0).load is None  # half a measurement is none
        load = measured(2.0, 1.0, 0).load
        assert load == TypeLoad(2.0, 1.0, 0, T0 - MIN) and load.pressure == 2.0


@given(
    current=SECONDS,
    gap=st.none() | SECONDS,
    eventful=st.booleans(),
    demand=st.floats(min_value=0, max_value=1e6),
    delivered=st.floats(min_value=0, max_value=1e6),
    backlog=st.integers(min_value=0, max_value=10**6),
    age=st.floats(min_value=0, max_value=7200),
    low=st.floats(min_value=1, max_value=86400),
    spread=st.floats(min_value=1, max_value=1000),
    factor=st.floats(min_value=1.01, max_value=16),
)
def test_intervals_stay_within_bounds(
    current: float,
    gap: float | None,
    eventful: bool,
    demand: float,
    delivered: float,
    backlog: int,
    age: float,
    low: float,
    spread: float,
    factor: float,
) -> None:
    lo = timedelta(seconds=low)
    hi = lo * spread
    task_type = measured(
        demand,
        delivered,
        backlog,
        age=timedelta(seconds=age),
        min_interval=lo,
        max_interval=hi,
        default_interval=lo,
        backoff_factor=factor,
    )
    after = adapt_interval(
        timedelta(seconds=current),
        task_type,
        eventful=eventful,
        gap=None if gap is None else timedelta(seconds=gap),
        now=T0,
    )
    assert lo <= after <= hi


# -- the fleet model ---------------------------------------------------------------


@dataclass
class Fleet:
    """Always-changing sources served by workers of capacity ``capacity``
    (worker-seconds per second); one :meth:`round` visits every source once."""

    durations: list[float]
    intervals: list[timedelta]
    capacity: float
    backlog: float = 0.0  # worker-seconds asked and not yet served

    def demand(self) -> float:
        return sum(
            d / (i.total_seconds() + d) for d, i in zip(self.durations, self.intervals, strict=True)
        )

    def round(self, task_type_of) -> tuple[float, float]:  # type: ignore[no-untyped-def]
        demand = self.demand()
        # the workers serve what is asked, and the backlog, up to their capacity
        delivered = min(self.capacity, demand + self.backlog)
        self.backlog = max(0.0, self.backlog + demand - self.capacity)
        task_type = task_type_of(demand, delivered, 1 if self.backlog > 0 else 0)
        self.intervals = [
            adapt_interval(i, task_type, eventful=True, gap=i + timedelta(seconds=d), now=T0)
            for d, i in zip(self.durations, self.intervals, strict=True)
        ]
        return demand, delivered


FLEETS = st.lists(st.floats(min_value=10, max_value=3600), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(durations=FLEETS, spare=st.floats(min_value=1.0, max_value=50), start=st.floats(1, 64))
def test_with_spare_capacity_every_changing_source_reaches_min_interval(
    durations: list[float], spare: float, start: float
) -> None:
    lo, hi = HOUR, 64 * DAY
    at_min = sum(d / (lo.total_seconds() + d) for d in durations)
    fleet = Fleet(durations, [min(hi, DAY * start)] * len(durations), capacity=at_min * spare)

    def task_type_of(demand: float, delivered: float, backlog: int):  # type: ignore[no-untyped-def]
        return measured(demand, delivered, backlog, min_interval=lo, max_interval=hi)

    for _ in range(200):
        fleet.round(task_type_of)
    assert fleet.intervals == [lo] * len(durations)
    assert fleet.backlog == 0


@settings(max_examples=60, deadline=None)
@given(
    durations=FLEETS,
    share=st.floats(min_value=0.02, max_value=0.8),
    start=st.floats(min_value=0.05, max_value=8),
)
def test_under_overload_the_demand_converges_to_the_capacity(
    durations: list[float], share: float, start: float
) -> None:
    """Capacity ``share`` of what the sources would ask at min_interval:
    after a transient the demand stays within [C / ((1 + MARGIN) x (1 +
    HEADROOM)), C x (1 + HEADROOM)] -- under the capacity after a
    lengthening, a headroom's worth over it after a round of shrinks -- and
    averages at most 10 % over it, while the workers deliver at least 90 %
    of it (the demand, or the backlog the transient left). A demand within
    the tolerance over the capacity is held (it is what measurement lags
    look like), so the backlog grows by at most that much per round."""
    # runs shorter than half the shortest interval: a visit on time comes
    # less than f x I after the previous start (the per-task rule's "late")
    lo, hi = 2 * HOUR, timedelta(days=3650)
    at_min = sum(d / (lo.total_seconds() + d) for d in durations)
    capacity = at_min * share
    initial = max(lo, min(hi, DAY * start))
    fleet = Fleet(durations, [initial] * len(durations), capacity=capacity)

    def task_type_of(demand: float, delivered: float, backlog: int):  # type: ignore[no-untyped-def]
        return measured(demand, delivered, backlog, min_interval=lo, max_interval=hi)

    for _ in range(150):
        fleet.round(task_type_of)
    backlog = fleet.backlog
    rounds = [fleet.round(task_type_of) for _ in range(200)]
    demands = [demand for demand, _ in rounds]
    slack = 1e-6
    assert min(demands) >= capacity / (1 + MARGIN) / (1 + HEADROOM) * (1 - slack)
    assert max(demands) <= capacity * (1 + HEADROOM) * (1 + slack)
    assert sum(demands) / len(demands) <= capacity * 1.1
    # the workers stay busy: what is asked, or the backlog left by the transient
    assert sum(delivered for _, delivered in rounds) / len(rounds) >= capacity * 0.9
    assert fleet.backlog - backlog <= capacity * TOLERANCE * 200 * (1 + slack)


def test_the_rule_uses_the_measurement_of_its_type_at_the_run_s_end() -> None:
    task_type = measured(1.5, 1.0, 3, age=30 * MIN)
    assert pressure(task_type, at(0)) == 1.5
    assert pressure(task_type, at(0.6)) is None  # older than LOAD_MAX_AGE by then
