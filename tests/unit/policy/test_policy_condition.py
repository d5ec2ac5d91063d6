"""condition(): every reason code, and the ERROR column of DESIGN.md §3."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from policy_helpers import DAY, HOUR, MIN, T0, adaptive_type, at, make_task, make_type, window

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus
from swh_like_scheduler.policy import (
    REASON_LEVEL,
    Condition,
    ConditionReport,
    Reason,
    condition,
    start_times,
)


def check(report: ConditionReport, level: Condition, reason: Reason) -> None:
    assert (report.level, report.reason) == (level, reason)
    assert report.detail


def good_periodic(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "period": DAY,
        "last_good_start_at": at(0),
        "last_good_end_at": at(1),
        "last_start_at": at(0),
        "last_end_at": at(1),
    }
    values.update(changes)
    return values


def test_every_reason_has_a_level() -> None:
    assert set(REASON_LEVEL) == set(Reason)


class TestStatus:
    def test_cancelled(self) -> None:
        task = make_task(status=TaskStatus.CANCELLED)
        check(condition(task, make_type(), at(100)), Condition.OK, Reason.CANCELLED)

    def test_completed(self) -> None:
        task = make_task(ScheduleKind.ONESHOT, status=TaskStatus.COMPLETED)
        check(condition(task, make_type(), at(100)), Condition.OK, Reason.COMPLETED)

    def test_disabled_by_an_operator(self) -> None:
        task = make_task(status=TaskStatus.DISABLED)
        check(condition(task, make_type(), at(100)), Condition.WARNING, Reason.DISABLED)

    def test_gave_up_after_failures(self) -> None:
        task = make_task(ScheduleKind.ONESHOT, status=TaskStatus.DISABLED, failure_count=1)
        check(condition(task, make_type(), at(1)), Condition.ERROR, Reason.GAVE_UP)


class TestOneshot:
    def test_ok_before_its_instant(self) -> None:
        task = make_task(ScheduleKind.ONESHOT, next_run=at(2))
        check(condition(task, make_type(), at(1)), Condition.OK, Reason.OK)

    def test_late_after_instant_plus_delay_plus_allowed(self) -> None:
        task = make_task(
            ScheduleKind.ONESHOT, next_run=at(2), max_delay=HOUR, max_allowed_duration=HOUR
        )
        check(condition(task, make_type(), at(4)), Condition.OK, Reason.OK)
        check(condition(task, make_type(), at(4) + MIN), Condition.ERROR, Reason.LATE)

    def test_likely_late(self) -> None:
        task = make_task(
            ScheduleKind.ONESHOT, next_run=at(2), max_delay=HOUR, expected_duration=2 * HOUR
        )
        check(condition(task, make_type(), at(1)), Condition.WARNING, Reason.LIKELY_LATE)


class TestPeriodic:
    def test_ok(self) -> None:
        task = make_task(**good_periodic())
        check(condition(task, make_type(), at(5)), Condition.OK, Reason.OK)

    def test_stale_when_now_minus_ref_exceeds_period(self) -> None:
        task = make_task(**good_periodic())
        check(condition(task, make_type(), at(24)), Condition.OK, Reason.OK)
        check(condition(task, make_type(), at(24) + MIN), Condition.ERROR, Reason.STALE)

    def test_likely_late_when_idle(self) -> None:
        task = make_task(**good_periodic(average_good_duration=2 * HOUR))
        check(condition(task, make_type(), at(21)), Condition.OK, Reason.OK)
        check(condition(task, make_type(), at(22) + MIN), Condition.WARNING, Reason.LIKELY_LATE)

    def test_likely_late_when_running_uses_owner_started_at(self) -> None:
        task = make_task(
            **good_periodic(average_good_duration=2 * HOUR),
            owner_started_at=at(22) + MIN,
            owner_node="n1",
        )
        # now is early, but the run started too late to finish in time
        check(condition(task, make_type(), at(22) + 2 * MIN), Condition.WARNING, Reason.LIKELY_LATE)
        on_time = task.updated(owner_started_at=at(21))
        check(condition(on_time, make_type(), at(22) + 2 * MIN), Condition.OK, Reason.OK)

    def test_blackout_can_make_a_task_likely_late(self) -> None:
        task = make_task(**good_periodic(blackout_periods=(window("10:00", "12:30"),)))
        # idle at 10:00 the next day: it cannot start before 12:30, past ref + P (12:00)
        check(condition(task, make_type(), at(22)), Condition.WARNING, Reason.LIKELY_LATE)

    def test_never_run(self) -> None:
        task = make_task(created_at=at(0), next_run=at(0))
        check(condition(task, make_type(), at(1)), Condition.OK, Reason.FIRST_RUN_PENDING)
        check(condition(task, make_type(), at(25)), Condition.ERROR, Reason.NEVER_RUN)

    def test_last_run_failed(self) -> None:
        task = make_task(**good_periodic(failure_count=1, last_start_at=at(2), last_end_at=at(3)))
        check(
            condition(task, make_type(num_retries=2), at(3)),
            Condition.WARNING,
            Reason.LAST_RUN_FAILED,
        )


class TestCron:
    def cron_task(self, **changes: Any) -> Task:
        values: dict[str, Any] = {
            "last_good_start_at": at(-9),  # today 03:00 UTC
            "last_good_end_at": at(-8),
        }
        values.update(changes)
        return make_task(ScheduleKind.CRON, **values)

    def test_late_after_next_firing_plus_max_duration(self) -> None:
        task = self.cron_task()
        next_firing = datetime(2024, 6, 4, 3, 0, tzinfo=UTC)
        check(condition(task, make_type(), next_firing + 2 * HOUR), Condition.OK, Reason.OK)
        check(
            condition(task, make_type(), next_firing + 2 * HOUR + MIN),
            Condition.ERROR,
            Reason.LATE,
        )

    def test_running_past_the_bound_is_late(self) -> None:
        task = self.cron_task(owner_started_at=datetime(2024, 6, 4, 4, 0, tzinfo=UTC))
        now = datetime(2024, 6, 4, 5, 30, tzinfo=UTC)
        check(condition(task, make_type(), now), Condition.ERROR, Reason.LATE)

    def test_likely_late(self) -> None:
        task = self.cron_task(expected_duration=3 * HOUR)
        check(condition(task, make_type(), T0), Condition.WARNING, Reason.LIKELY_LATE)

    def test_never_run(self) -> None:
        task = make_task(ScheduleKind.CRON, created_at=at(0))
        check(condition(task, make_type(), at(1)), Condition.OK, Reason.FIRST_RUN_PENDING)
        # first firing 03:00 the next day, 2 h allowed
        late = datetime(2024, 6, 4, 5, 1, tzinfo=UTC)
        check(condition(task, make_type(), late), Condition.ERROR, Reason.NEVER_RUN)


class TestAdaptive:
    def test_stale_after_can_start_by_plus_interval(self) -> None:
        task = make_task(
            ScheduleKind.ADAPTIVE,
            current_interval=DAY,
            last_good_start_at=at(0),
            last_good_end_at=at(1),
        )
        check(condition(task, adaptive_type(), at(49)), Condition.OK, Reason.OK)
        check(condition(task, adaptive_type(), at(49) + MIN), Condition.ERROR, Reason.STALE)


class TestDurations:
    def test_running_too_long(self) -> None:
        task = make_task(**good_periodic(owner_started_at=at(2)))
        task_type = make_type(max_allowed_duration=HOUR)
        check(condition(task, task_type, at(3)), Condition.OK, Reason.OK)
        check(condition(task, task_type, at(3) + MIN), Condition.ERROR, Reason.RUNNING_TOO_LONG)

    def test_task_bounds_override_the_type(self) -> None:
        task = make_task(**good_periodic(owner_started_at=at(2), max_allowed_duration=3 * HOUR))
        task_type = make_type(max_allowed_duration=HOUR)
        check(condition(task, task_type, at(4)), Condition.OK, Reason.OK)

    def test_overran_expected_duration_while_running(self) -> None:
        task = make_task(**good_periodic(owner_started_at=at(2)))
        task_type = make_type(max_expected_duration=HOUR)
        check(
            condition(task, task_type, at(3) + MIN),
            Condition.WARNING,
            Reason.OVERRAN_EXPECTED_DURATION,
        )

    def test_overran_expected_duration_last_run(self) -> None:
        task = make_task(**good_periodic(last_good_end_at=at(3), last_end_at=at(3)))
        check(
            condition(task, make_type(max_expected_duration=2 * HOUR), at(4)),
            Condition.WARNING,
            Reason.OVERRAN_EXPECTED_DURATION,
        )
        check(
            condition(task, make_type(max_expected_duration=3 * HOUR), at(4)),
            Condition.OK,
            Reason.OK,
        )


@pytest.mark.parametrize(
    ("reason", "level"),
    [
        (Reason.OK, Condition.OK),
        (Reason.FIRST_RUN_PENDING, Condition.OK),
        (Reason.GAVE_UP, Condition.ERROR),
        (Reason.NEVER_RUN, Condition.ERROR),
        (Reason.LIKELY_LATE, Condition.WARNING),
    ],
)
def test_reason_levels(reason: Reason, level: Condition) -> None:
    assert REASON_LEVEL[reason] is level


INSTANT = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[+-]\d\d:\d\d)"


def instants(detail: str) -> list[datetime]:
    import re

    return [datetime.fromisoformat(text) for text in re.findall(INSTANT, detail)]


class TestWords:
    def test_likely_late_reads_true_when_the_start_is_past_the_promise(self) -> None:
        """A blackout pushes the earliest start (12:30) past the time the run
        should be done by (12:00): the reason names a start, then a later end,
        then the promise it misses, never an end before its start."""
        blackout = (window("10:00", "12:30"),)
        task = make_task(**good_periodic(blackout_periods=blackout))
        report = condition(task, make_type(), at(22))
        assert report.reason is Reason.LIKELY_LATE
        start, promise = instants(report.detail)  # no average duration yet
        assert start == at(24) + 30 * MIN and promise == at(24), report.detail
        assert report.detail.startswith("It cannot start before"), report.detail
        timed = make_task(**good_periodic(blackout_periods=blackout, average_good_duration=HOUR))
        report = condition(timed, make_type(), at(22))
        assert report.reason is Reason.LIKELY_LATE
        start, end, promise = instants(report.detail)
        assert start < end and end > promise, report.detail

    def test_times_are_in_the_task_zone_with_its_offset(self) -> None:
        task = make_task(**good_periodic(tz="Europe/Paris", average_good_duration=2 * HOUR))
        report = condition(task, make_type(), at(22) + MIN)
        assert report.reason is Reason.LIKELY_LATE
        found = instants(report.detail)
        assert found and all(t.utcoffset() in (HOUR, 2 * HOUR) for t in found), report.detail

    def test_counts_read_right(self) -> None:
        one = make_task(**good_periodic(failure_count=1, last_start_at=at(2), last_end_at=at(3)))
        retrying = make_type(num_retries=2)
        assert "The last run failed;" in condition(one, retrying, at(3)).detail
        two = one.updated(failure_count=2)
        assert "The last 2 runs failed;" in condition(two, retrying, at(3)).detail


class TestPausedType:
    def test_a_promise_broken_during_the_pause_is_a_warning_saying_so(self) -> None:
        task = make_task(**good_periodic(tz="Europe/Paris"))
        paused = make_type(paused_at=at(20))
        running = make_type()
        report = condition(task, paused, at(24) + MIN)
        plain = condition(task, running, at(24) + MIN)
        check(plain, Condition.ERROR, Reason.STALE)
        check(report, Condition.WARNING, Reason.PAUSED)
        # 08:00 UTC is 10:00 in Paris (CEST): the task's own zone, as its other times
        assert report.detail == (
            "Its type has been paused since 2024-06-04 10:00:00+02:00: nothing of it is "
            f"dispatched until `task-type resume load-git`. Meanwhile: {plain.detail}"
        )

    def test_a_promise_broken_before_the_pause_stays_an_error(self) -> None:
        task = make_task(**good_periodic(tz="Europe/Paris"))
        running = make_type()
        finish_by = start_times(task, running, at(24) + MIN).finish_by
        assert finish_by is not None
        paused = make_type(paused_at=finish_by + timedelta(seconds=1))
        report = condition(task, paused, at(24) + MIN)
        plain = condition(task, running, at(24) + MIN)
        check(report, Condition.ERROR, Reason.STALE)
        assert report.detail.startswith(plain.detail + " Its type has been paused since ")

    def test_only_waiting_tasks_are_held_by_the_pause(self) -> None:
        paused = make_type(paused_at=at(20))
        ok = make_task(**good_periodic())
        assert "paused since" in condition(ok, paused, at(5)).detail
        assert condition(ok, paused, at(5)).reason is Reason.OK
        for status in (TaskStatus.SCHEDULED, TaskStatus.DISABLED, TaskStatus.CANCELLED):
            other = ok.updated(status=status)
            assert "paused" not in condition(other, paused, at(25)).detail
