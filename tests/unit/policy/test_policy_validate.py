"""validate_task, prepare_new_task, and start_times properties over random tasks."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import DAY, HOUR, MIN, T0, adaptive_type, at, make_task, make_type, window

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import BlackoutPeriod, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.policy import (
    blackout_at,
    covers_whole_day,
    prepare_new_task,
    start_times,
    validate_task,
)


def refused(field: str, task: Task, task_type: TaskType) -> str:
    with pytest.raises(InvalidInput) as caught:
        validate_task(task, task_type)
    assert caught.value.field == field
    return caught.value.message


def test_valid_tasks_of_every_kind_pass() -> None:
    validate_task(make_task(ScheduleKind.ONESHOT), make_type(num_retries=3))
    validate_task(make_task(period=DAY, cooldown=HOUR), make_type(num_retries=3))
    validate_task(make_task(ScheduleKind.CRON), make_type())
    validate_task(make_task(ScheduleKind.ADAPTIVE), adaptive_type())


def test_wrong_type() -> None:
    refused("type", make_task(), make_type(type="load-hg"))


def test_cron_needs_a_positive_max_duration() -> None:
    # the model refuses it (as a period or an interval of 0); so does
    # validate_task, for a task read back from a store
    with pytest.raises(InvalidInput) as caught:
        make_task(ScheduleKind.CRON, cron_max_duration=timedelta(0))
    assert caught.value.field == "cron_max_duration"
    stored = Task.stored(
        {**make_task(ScheduleKind.CRON).__dict__, "cron_max_duration": timedelta(0)},
        arguments_hash="",
    )
    assert "longer than zero" in refused("cron_max_duration", stored, make_type())


def test_cron_that_never_fires() -> None:
    refused("cron", make_task(ScheduleKind.CRON, cron="0 0 30 2 *"), make_type())


def test_cooldown_must_be_shorter_than_period() -> None:
    refused("cooldown", make_task(period=HOUR, cooldown=HOUR), make_type())


def test_adaptive_needs_bounds_with_a_backoff_factor() -> None:
    task_type = make_type(default_interval=DAY, backoff_factor=2.0, max_interval=2 * DAY)
    refused("min_interval", make_task(ScheduleKind.ADAPTIVE), task_type)
    # without a backoff factor the interval is fixed and needs no bounds
    validate_task(make_task(ScheduleKind.ADAPTIVE), make_type(default_interval=DAY))


def test_adaptive_interval_within_bounds() -> None:
    task = make_task(ScheduleKind.ADAPTIVE, current_interval=HOUR)
    assert "min_interval" in refused("current_interval", task, adaptive_type())


def test_blackouts_covering_the_day() -> None:
    task = make_task(blackout_periods=(window("06:00", "18:00"), window("18:00", "06:00")))
    refused("blackout_periods", task, make_type())


def test_expected_longer_than_allowed() -> None:
    task = make_task(max_expected_duration=2 * HOUR)
    refused("max_expected_duration", task, make_type(max_allowed_duration=HOUR))


def test_retry_budget_is_part_of_validation() -> None:
    assert "worst-case retry" in refused("period", make_task(period=HOUR), make_type(num_retries=3))


def test_prepare_new_task_sets_initial_state() -> None:
    task = make_task(
        ScheduleKind.ONESHOT, next_run=at(5), deadline=at(0), max_delay=HOUR, created_at=None
    )
    ready = prepare_new_task(task, make_type(num_retries=2), now=T0)
    assert (ready.next_run, ready.deadline) == (at(5), at(6))
    assert ready.created_at == T0
    assert ready.retries_left == 2
    assert ready.status is TaskStatus.WAITING


def test_prepare_new_cron_task() -> None:
    task = make_task(ScheduleKind.CRON, created_at=None, next_run=T0, deadline=T0)
    ready = prepare_new_task(task, make_type(), now=T0)
    assert ready.next_run == datetime(2024, 6, 4, 3, 0, tzinfo=UTC)
    assert ready.deadline == ready.next_run + 2 * HOUR


def test_prepare_new_task_refuses_invalid_tasks() -> None:
    with pytest.raises(InvalidInput):
        prepare_new_task(make_task(period=HOUR), make_type(num_retries=3), now=T0)


TIMES = st.builds(time, st.integers(0, 23), st.sampled_from([0, 20, 30, 45]))
ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham"]
INSTANTS = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2024, 12, 31), timezones=st.just(UTC)
)


@st.composite
def blackout_tasks(draw: st.DrawFn) -> tuple[Task, datetime]:
    periods = []
    for _ in range(draw(st.integers(1, 3))):
        start, end = draw(TIMES), draw(TIMES)
        if start != end:
            periods.append(BlackoutPeriod(start, end))
    if not periods or covers_whole_day(periods):
        periods = [BlackoutPeriod(time(1), time(2))]
    kind = draw(st.sampled_from(list(ScheduleKind)))
    created = draw(INSTANTS)
    last_good_end = draw(st.none() | st.just(created + timedelta(hours=draw(st.integers(1, 400)))))
    failures = draw(st.integers(0, 4))
    changes: dict[str, Any] = {
        "tz": draw(st.sampled_from(ZONES)),
        "blackout_periods": tuple(periods),
        "created_at": created,
        "next_run": created + timedelta(minutes=draw(st.integers(0, 3000))),
        "failure_count": failures,
    }
    if last_good_end is not None:
        changes.update(
            last_good_start_at=last_good_end - HOUR,
            last_good_end_at=last_good_end,
            last_start_at=last_good_end - HOUR,
            last_end_at=last_good_end + (MIN if failures else timedelta(0)),
        )
    elif failures:
        changes.update(last_start_at=created, last_end_at=created + MIN)
    task = make_task(kind, **changes)
    now = created + timedelta(minutes=draw(st.integers(0, 60 * 24 * 30)))
    return task, now


@settings(max_examples=150, deadline=None)
@given(case=blackout_tasks())
def test_can_start_by_is_never_inside_a_blackout(case: tuple[Task, datetime]) -> None:
    task, now = case
    times = start_times(task, make_type(num_retries=3, default_interval=DAY), now)
    assert blackout_at(task, times.can_start_by) is None
    if times.can_start_by <= now:
        assert blackout_at(task, now) is None
    # should_start_by never moves for a blackout
    bare = task.updated(blackout_periods=())
    plain = start_times(bare, make_type(num_retries=3, default_interval=DAY), now)
    assert times.should_start_by == plain.should_start_by
    assert times.can_start_by >= plain.can_start_by
