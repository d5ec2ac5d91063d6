"""apply_outcome: statistics, adaptive interval, retries, status, idempotency."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import DAY, HOUR, MIN, adaptive_type, at, make_task, make_type, rng, window

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskStatus
from swh_like_scheduler.policy import (
    EWMA_ALPHA,
    Outcome,
    already_applied,
    apply_outcome,
    classify_result,
    ewma,
    next_interval,
    start_times,
)


def owned(task: Task, started: datetime) -> Task:
    return task.updated(
        status=TaskStatus.SCHEDULED,
        owner_node="n1",
        owner_name="w1",
        owner_tag="tag",
        owner_started_at=started,
        owner_last_ping_at=started,
    )


def outcome(status: RunStatus | str, start: float, end: float) -> Outcome:
    return Outcome(status=RunStatus(status), started=at(start), ended=at(end), backend_id="b")


class TestOutcome:
    def test_open_statuses_are_refused(self) -> None:
        with pytest.raises(InvalidInput) as caught:
            Outcome(status=RunStatus.STARTED, ended=at(0))
        assert caught.value.field == "status"

    def test_start_after_end_is_refused(self) -> None:
        with pytest.raises(InvalidInput) as caught:
            outcome("eventful", 2, 1)
        assert caught.value.field == "started"

    def test_naive_end_is_refused(self) -> None:
        with pytest.raises(InvalidInput):
            Outcome(status=RunStatus.FAILED, ended=datetime(2024, 1, 1))


def test_classify_result() -> None:
    assert classify_result({"status": "uneventful"}) is RunStatus.UNEVENTFUL
    assert classify_result({"status": "permfailed", "why": "gone"}) is RunStatus.PERMFAILED
    assert classify_result({"stats": 3}) is RunStatus.EVENTFUL
    assert classify_result(None) is RunStatus.UNEVENTFUL
    assert classify_result(0) is RunStatus.UNEVENTFUL
    assert classify_result([1]) is RunStatus.EVENTFUL
    with pytest.raises(InvalidInput):
        classify_result({"status": "weird"})
    # a status that cannot name one (not hashable, not a string) is refused
    # the same way, naming the field and the choices
    for status in (["eventful"], {"eventful": 1}, None, 1):
        with pytest.raises(InvalidInput, match=r"status.*eventful, failed, permfailed, uneventful"):
            classify_result({"status": status})
    # any mapping, not only a dict
    assert classify_result(MappingProxyType({"status": "failed"})) is RunStatus.FAILED


def test_ewma() -> None:
    assert ewma(None, HOUR) == HOUR
    assert ewma(HOUR, 2 * HOUR) == HOUR * (1 + EWMA_ALPHA)
    assert ewma(HOUR, 2 * HOUR, alpha=1.0) == 2 * HOUR


class TestGoodRuns:
    def test_periodic_success(self) -> None:
        task = owned(make_task(period=DAY, cooldown=HOUR, failure_count=2), at(0))
        after = apply_outcome(task, make_type(num_retries=3), outcome("eventful", 0, 2), rng=rng())
        assert after.failure_count == 0
        assert after.retries_left == 3
        assert (after.last_good_start_at, after.last_good_end_at) == (at(0), at(2))
        assert (after.last_start_at, after.last_end_at) == (at(0), at(2))
        assert after.average_good_duration == 2 * HOUR
        assert after.status is TaskStatus.WAITING
        assert after.next_run == at(3)  # end + cooldown
        assert after.deadline == at(22)  # start + period - avg
        for name in ("owner_node", "owner_name", "owner_tag", "owner_started_at"):
            assert getattr(after, name) is None
        assert after.owner_last_ping_at is None and after.steal_start_at is None

    def test_ewma_update(self) -> None:
        task = make_task(average_good_duration=HOUR)
        after = apply_outcome(task, make_type(), outcome("uneventful", 0, 2), rng=rng())
        assert after.average_good_duration == EWMA_ALPHA * 2 * HOUR + (1 - EWMA_ALPHA) * HOUR

    def test_start_taken_from_the_lease_when_the_event_lacks_it(self) -> None:
        task = owned(make_task(), at(1))
        done = Outcome(status=RunStatus.EVENTFUL, ended=at(2))
        after = apply_outcome(task, make_type(), done, rng=rng())
        assert after.last_good_start_at == at(1)
        assert after.average_good_duration == HOUR

    def test_unknown_start_leaves_the_average_alone(self) -> None:
        task = make_task(average_good_duration=HOUR)
        after = apply_outcome(
            task, make_type(), Outcome(status=RunStatus.EVENTFUL, ended=at(2)), rng=rng()
        )
        assert after.average_good_duration == HOUR
        assert after.last_good_start_at == at(2)

    def test_oneshot_completes(self) -> None:
        task = owned(make_task(ScheduleKind.ONESHOT), at(0))
        after = apply_outcome(task, make_type(), outcome("uneventful", 0, 1), rng=rng())
        assert after.status is TaskStatus.COMPLETED

    def test_adaptive_eventful_shrinks_uneventful_grows(self) -> None:
        task_type = adaptive_type()
        # the previous good run started 4 days before this one: on time
        task = make_task(
            ScheduleKind.ADAPTIVE, current_interval=4 * DAY, last_good_start_at=at(-96)
        )
        eventful = apply_outcome(task, task_type, outcome("eventful", 0, 1), rng=rng())
        uneventful = apply_outcome(task, task_type, outcome("uneventful", 0, 1), rng=rng())
        assert eventful.current_interval == 2 * DAY
        assert uneventful.current_interval == 8 * DAY
        assert uneventful.next_run == at(1) + 8 * DAY
        assert uneventful.deadline == at(1) + 16 * DAY

    def test_a_first_good_run_leaves_the_interval_alone(self) -> None:
        task_type = adaptive_type()
        task = make_task(ScheduleKind.ADAPTIVE, current_interval=4 * DAY)
        for status in ("eventful", "uneventful"):
            after = apply_outcome(task, task_type, outcome(status, 0, 1), rng=rng())
            assert after.current_interval == 4 * DAY
            assert after.last_good_start_at == at(0)

    def test_a_late_eventful_run_shrinks_the_interval_by_its_gap(self) -> None:
        task_type = adaptive_type()  # backoff factor 2
        task = make_task(ScheduleKind.ADAPTIVE, current_interval=4 * DAY)

        def after_gap(hours: float) -> timedelta | None:
            last = task.updated(last_good_start_at=at(-hours))
            return apply_outcome(
                last, task_type, outcome("eventful", 0, 1), rng=rng()
            ).current_interval

        assert after_gap(96) == 2 * DAY  # on time: halved
        assert after_gap(144) == 3 * DAY  # 2 days late: the gap halved
        assert after_gap(192) == 4 * DAY  # twice the interval: a change was expected
        assert after_gap(400) == 4 * DAY
        assert after_gap(48) == DAY  # an early visit: its gap halved
        late = task.updated(last_good_start_at=at(-400))
        grown = apply_outcome(late, task_type, outcome("uneventful", 0, 1), rng=rng())
        assert grown.current_interval == 8 * DAY

    def test_adaptive_interval_is_clamped(self) -> None:
        task_type = adaptive_type(min_interval=DAY, max_interval=3 * DAY)
        assert next_interval(DAY + HOUR, task_type, eventful=True) == DAY
        assert next_interval(2 * DAY, task_type, eventful=True, gap=2 * HOUR) == DAY
        assert next_interval(2 * DAY, task_type, eventful=False) == 3 * DAY
        fixed = make_type(default_interval=DAY)  # no backoff_factor: no adaptation
        assert next_interval(DAY, fixed, eventful=True) == DAY

    def test_operator_status_is_kept(self) -> None:
        for status in (TaskStatus.DISABLED, TaskStatus.CANCELLED):
            task = make_task(status=status)
            after = apply_outcome(task, make_type(), outcome("eventful", 0, 1), rng=rng())
            assert after.status is status


class TestFailures:
    def test_failure_counts_and_schedules_the_retry(self) -> None:
        task = owned(make_task(last_good_start_at=at(-20), last_good_end_at=at(-19)), at(0))
        after = apply_outcome(task, make_type(num_retries=3), outcome("failed", 0, 1), rng=rng())
        assert after.failure_count == 1
        assert after.retries_left == 2
        assert after.next_run == at(1) + 5 * MIN
        assert after.deadline == at(-20) + DAY
        assert after.last_good_end_at == at(-19)
        assert (after.last_start_at, after.last_end_at) == (at(0), at(1))
        assert after.status is TaskStatus.WAITING

    def test_jitter_comes_from_the_injected_source(self) -> None:
        task_type = make_type(num_retries=3, retry_jitter=10 * MIN)
        task = make_task()
        low = apply_outcome(task, task_type, outcome("failed", 0, 1), rng=lambda: 0.0)
        high = apply_outcome(task, task_type, outcome("failed", 0, 1), rng=lambda: 1.0)
        assert low.next_run == at(1) + 5 * MIN
        assert high.next_run == at(1) + 15 * MIN
        # recomputing from the stored task gives the same instant without randomness
        assert start_times(high, task_type, at(1)).can_start_by == high.next_run

    def test_timed_out_is_a_failure(self) -> None:
        task = make_task()
        after = apply_outcome(task, make_type(), outcome("timed_out", 0, 1), rng=rng())
        assert after.failure_count == 1

    def test_oneshot_disabled_after_retries(self) -> None:
        task_type = make_type(num_retries=1)
        task = make_task(ScheduleKind.ONESHOT, next_run=at(0), deadline=at(0))
        first = apply_outcome(task, task_type, outcome("failed", 0, 1), rng=rng())
        assert first.status is TaskStatus.WAITING
        assert first.next_run == at(1) + 5 * MIN
        second = apply_outcome(first, task_type, outcome("failed", 1.5, 2), rng=rng())
        assert second.status is TaskStatus.DISABLED
        assert second.failure_count == 2

    def test_oneshot_without_retries_is_disabled_at_once(self) -> None:
        task = make_task(ScheduleKind.ONESHOT)
        after = apply_outcome(task, make_type(), outcome("failed", 0, 1), rng=rng())
        assert after.status is TaskStatus.DISABLED

    def test_permfailed_disables_recurring_tasks_too(self) -> None:
        task = make_task()
        after = apply_outcome(
            task, make_type(num_retries=5), outcome("permfailed", 0, 1), rng=rng()
        )
        assert after.status is TaskStatus.DISABLED
        assert after.failure_count == 1

    def test_recurring_returns_to_normal_schedule_after_retries(self) -> None:
        task_type = make_type(num_retries=2)
        task = make_task(period=DAY, last_good_start_at=at(-20), last_good_end_at=at(-19))
        task = apply_outcome(task, task_type, outcome("failed", 0, 1), rng=rng())
        task = apply_outcome(task, task_type, outcome("failed", 2, 3), rng=rng())
        assert task.next_run == at(3) + HOUR
        task = apply_outcome(task, task_type, outcome("failed", 5, 6), rng=rng())
        assert task.status is TaskStatus.WAITING
        assert task.failure_count == 3
        assert task.retries_left == 2  # a fresh cycle
        assert task.next_run == at(5) + DAY

    def test_retry_then_blackout(self) -> None:
        task = make_task(blackout_periods=(window("13:00", "14:00"),))
        after = apply_outcome(
            task, make_type(num_retries=1), outcome("failed", 0.5, 0.95), rng=rng()
        )
        assert after.next_run == at(2)  # 12:57 + 5 min = 13:02, inside the window


class TestNeutral:
    def test_lost_run_changes_no_statistic(self) -> None:
        task = owned(
            make_task(
                last_good_start_at=at(-20),
                last_good_end_at=at(-19),
                average_good_duration=HOUR,
            ),
            at(0),
        )
        after = apply_outcome(task, make_type(num_retries=2), outcome("lost", 0, 1), rng=rng())
        assert after.failure_count == 0
        assert after.average_good_duration == HOUR
        assert after.last_end_at == at(1)
        assert after.last_start_at is None
        assert after.status is TaskStatus.WAITING
        assert after.owner_tag is None
        assert after.next_run == at(-19)  # runnable again at once

    def test_lost_oneshot_runs_again(self) -> None:
        task = make_task(ScheduleKind.ONESHOT, next_run=at(0), deadline=at(0))
        after = apply_outcome(task, make_type(), outcome("lost", 0, 1), rng=rng())
        assert after.status is TaskStatus.WAITING
        assert after.next_run == at(0)


class TestIdempotency:
    def test_outcome_key(self) -> None:
        assert outcome("failed", 0, 1).key == "b"
        unnamed = Outcome(status=RunStatus.LOST, ended=at(1), slot=at(0))
        assert unnamed.key == f"{at(0).isoformat()}/{at(1).isoformat()}"
        assert unnamed.key == Outcome(status=RunStatus.LOST, ended=at(1), slot=at(0)).key

    def test_same_outcome_twice_is_detected(self) -> None:
        task = make_task()
        done = outcome("failed", 0, 1)
        assert not already_applied(task, done)
        after = apply_outcome(task, make_type(), done, rng=rng())
        assert already_applied(after, done)
        assert already_applied(after, outcome("eventful", -2, -1))  # older: superseded
        assert not already_applied(after, outcome("eventful", 2, 3))


STATUSES = [s for s in RunStatus if not s.is_open]


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[RunStatus, float]]:
    steps = draw(st.lists(st.tuples(st.sampled_from(STATUSES), st.floats(0.01, 48)), max_size=12))
    return steps


def replay(kind: ScheduleKind, steps: list[tuple[RunStatus, float]], seed: int) -> list[Task]:
    task_type = adaptive_type(num_retries=2, retry_jitter=5 * MIN)
    task = make_task(kind, **({"current_interval": DAY} if kind is ScheduleKind.ADAPTIVE else {}))
    clock = at(0)
    random_source = rng(seed)
    states = [task]
    for status, hours in steps:
        start = clock + timedelta(hours=hours)
        end = start + timedelta(minutes=30)
        task = apply_outcome(
            task, task_type, Outcome(status=status, started=start, ended=end), rng=random_source
        )
        states.append(task)
        clock = end
    return states


@settings(max_examples=80, deadline=None)
@given(
    kind=st.sampled_from(list(ScheduleKind)),
    steps=histories(),
    seed=st.integers(0, 1000),
)
def test_invariants_over_random_histories(
    kind: ScheduleKind, steps: list[tuple[RunStatus, float]], seed: int
) -> None:
    task_type = adaptive_type(num_retries=2, retry_jitter=5 * MIN)
    states = replay(kind, steps, seed)
    for (status, _), before, after in zip(steps, states[:-1], states[1:], strict=True):
        if status in (RunStatus.EVENTFUL, RunStatus.UNEVENTFUL):
            assert after.failure_count == 0  # a success always resets it
        elif status in (RunStatus.FAILED, RunStatus.PERMFAILED, RunStatus.TIMED_OUT):
            assert after.failure_count == before.failure_count + 1
        else:
            assert after.failure_count == before.failure_count
        if kind is ScheduleKind.ADAPTIVE:
            lo, hi = task_type.min_interval, task_type.max_interval
            assert after.current_interval is not None and lo is not None and hi is not None
            assert lo <= after.current_interval <= hi
        assert after.owner_started_at is None
        assert 0 <= after.retries_left <= 2
    # replaying the last outcome is detectable
    if steps:
        status, _ = steps[-1]
        last = states[-1]
        assert last.last_end_at is not None
        duplicate = Outcome(status=status, ended=last.last_end_at)
        assert already_applied(last, duplicate)


@settings(max_examples=100, deadline=None)
@given(
    start=st.floats(1, 72 * 24),
    eventful=st.lists(
        st.tuples(st.booleans(), st.none() | st.floats(-10, 200 * 24)), min_size=1, max_size=30
    ),
)
def test_adaptive_interval_stays_within_bounds(
    start: float, eventful: list[tuple[bool, float | None]]
) -> None:
    task_type = adaptive_type()
    lo, hi = task_type.min_interval, task_type.max_interval
    assert lo is not None and hi is not None
    interval = min(max(timedelta(hours=start), lo), hi)
    for flag, hours in eventful:
        gap = None if hours is None else timedelta(hours=hours)
        new = next_interval(interval, task_type, eventful=flag, gap=gap)
        assert lo <= new <= hi
        if flag:
            assert new <= interval
        else:
            assert new >= interval
        interval = new


def test_a_neutral_end_never_reuses_the_slot_that_ended() -> None:
    """Runs are unique per (task, slot): a lost run's task gets a new slot."""
    from datetime import UTC, datetime, timedelta

    from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
    from swh_like_scheduler.policy import Outcome, apply_outcome

    slot = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    task = Task(
        type="t",
        schedule_kind=ScheduleKind.ADAPTIVE,
        current_interval=timedelta(hours=1),
        next_run=slot,
        deadline=slot,
        created_at=slot - timedelta(days=1),
    )
    task_type = TaskType(type="t", backend_name="t")
    for status in (RunStatus.LOST, RunStatus.CANCELLED):
        for ended in (slot, slot + timedelta(minutes=3)):
            outcome = Outcome(status=status, ended=ended, slot=slot, backend_id="b")
            after = apply_outcome(task, task_type, outcome, rng=lambda: 0.5)
            assert after.next_run > slot
            assert after.next_run <= max(ended, slot + timedelta(microseconds=1))
