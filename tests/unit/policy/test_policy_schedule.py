"""start_times: every row of DESIGN.md §3, never-run tasks and every adjustment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from policy_helpers import DAY, HOUR, MIN, T0, adaptive_type, at, make_task, make_type, window

from swh_like_scheduler.domain.model import ScheduleKind
from swh_like_scheduler.policy import Adjustment, AdjustmentKind, compute_start_times, start_times


def kinds(adjustments: tuple[Adjustment, ...]) -> list[str]:
    return [str(a.kind) for a in adjustments]


class TestOneshot:
    def test_fresh_task_uses_the_requested_instant(self) -> None:
        task = make_task(ScheduleKind.ONESHOT, next_run=at(5), deadline=at(0))
        times = start_times(task, make_type(), now=T0)
        assert times.can_start_by == at(5)
        assert times.should_start_by == at(5)  # max_delay defaults to 0
        assert times.adjustments == ()

    def test_max_delay_and_max_allowed(self) -> None:
        task = make_task(
            ScheduleKind.ONESHOT, next_run=at(5), max_delay=HOUR, max_allowed_duration=2 * HOUR
        )
        times = start_times(task, make_type(), now=T0)
        assert times.should_start_by == at(6)
        assert times.finish_by == at(8)

    def test_after_a_failure_the_instant_is_read_from_the_deadline(self) -> None:
        # created for T = at(1) with max_delay 1 h -> deadline at(2); failed at at(1.5)
        task = make_task(
            ScheduleKind.ONESHOT,
            next_run=at(1.5),
            deadline=at(2),
            max_delay=HOUR,
            failure_count=1,
            last_start_at=at(1.4),
            last_end_at=at(1.5),
        )
        times = start_times(task, make_type(num_retries=3), now=at(1.5))
        assert times.should_start_by == at(2)
        assert times.can_start_by == at(1.5) + 5 * MIN
        assert kinds(times.adjustments) == ["retry_backoff"]
        assert times.adjustments[0].moved_from == at(1)


class TestPeriodic:
    def test_row(self) -> None:
        task = make_task(
            period=DAY,
            cooldown=2 * HOUR,
            last_good_start_at=at(0),
            last_good_end_at=at(1),
            last_start_at=at(0),
            last_end_at=at(1),
            average_good_duration=HOUR,
        )
        times = start_times(task, make_type(), now=at(2))
        assert times.can_start_by == at(3)  # last_good_end_at + cooldown
        assert times.should_start_by == at(23)  # ref + P - avg
        assert times.finish_by == at(24)
        assert kinds(times.adjustments) == ["cooldown"]
        assert times.adjustments[0].moved_from == at(1)

    def test_expected_duration_override_wins(self) -> None:
        task = make_task(
            last_good_start_at=at(0),
            last_good_end_at=at(1),
            average_good_duration=HOUR,
            expected_duration=3 * HOUR,
        )
        assert start_times(task, make_type(), now=at(2)).should_start_by == at(21)

    def test_never_run_uses_requested_first_run_and_creation(self) -> None:
        task = make_task(next_run=at(2), created_at=at(0))
        times = start_times(task, make_type(), now=at(0))
        assert times.can_start_by == at(2)
        assert times.should_start_by == at(24)  # created_at + P - 0
        assert times.reference_start == at(0)

    def test_never_run_without_created_at_uses_next_run(self) -> None:
        task = make_task(next_run=at(2), created_at=None)
        times = start_times(task, make_type(), now=at(0))
        assert (times.can_start_by, times.should_start_by) == (at(2), at(26))


class TestCron:
    def test_row(self) -> None:
        # T0 is 12:00 UTC; cron 03:00 UTC daily, 2 h allowed, 30 min average
        task = make_task(
            ScheduleKind.CRON,
            last_good_start_at=at(-9),  # 03:00 today
            last_good_end_at=at(-8),
            average_good_duration=30 * MIN,
        )
        times = start_times(task, make_type(), now=T0)
        tomorrow_3am = datetime(2024, 6, 4, 3, 0, tzinfo=UTC)
        assert times.can_start_by == tomorrow_3am
        assert times.should_start_by == tomorrow_3am + 2 * HOUR - 30 * MIN
        assert times.finish_by == tomorrow_3am + 2 * HOUR

    def test_never_run_counts_from_creation(self) -> None:
        task = make_task(ScheduleKind.CRON, created_at=at(0), next_run=at(0))
        times = start_times(task, make_type(), now=T0)
        assert times.can_start_by == datetime(2024, 6, 4, 3, 0, tzinfo=UTC)

    def test_in_the_task_zone(self) -> None:
        task = make_task(ScheduleKind.CRON, tz="Europe/Paris")
        # 03:00 CEST = 01:00 UTC
        assert start_times(task, make_type(), now=T0).can_start_by == datetime(
            2024, 6, 4, 1, 0, tzinfo=UTC
        )


class TestAdaptive:
    def test_row(self) -> None:
        task = make_task(
            ScheduleKind.ADAPTIVE,
            current_interval=2 * DAY,
            last_good_start_at=at(0),
            last_good_end_at=at(1),
            last_start_at=at(0),
            last_end_at=at(1),
        )
        times = start_times(task, adaptive_type(), now=at(1))
        assert times.can_start_by == at(1) + 2 * DAY
        assert times.should_start_by == at(1) + 4 * DAY

    def test_never_run(self) -> None:
        task = make_task(ScheduleKind.ADAPTIVE, next_run=at(3))
        times = start_times(task, adaptive_type(), now=at(0))
        assert (times.can_start_by, times.should_start_by) == (at(3), at(3) + DAY)


class TestRetries:
    def failed_periodic(self, failures: int, **changes: Any) -> dict[str, Any]:
        values: dict[str, Any] = {
            "period": DAY,
            "last_good_start_at": at(-20),
            "last_good_end_at": at(-19),
            "last_start_at": at(-1),
            "last_end_at": at(0),
            "failure_count": failures,
            "next_run": at(0),
        }
        values.update(changes)
        return values

    def test_retry_back_off_sequence(self) -> None:
        task_type = make_type(num_retries=3)
        expected = {1: 5 * MIN, 2: HOUR, 3: 4 * HOUR}
        for failures, wait in expected.items():
            task = make_task(**self.failed_periodic(failures))
            times = start_times(task, task_type, now=at(0))
            assert times.can_start_by == at(0) + wait
            assert kinds(times.adjustments) == ["retry_backoff"]
            assert times.should_start_by == at(-20) + DAY  # not moved

    def test_exhausted_recurring_falls_back_to_its_normal_schedule(self) -> None:
        task_type = make_type(num_retries=3)
        task = make_task(**self.failed_periodic(4))
        times = start_times(task, task_type, now=at(0))
        assert times.can_start_by == at(-1) + DAY  # one period after the failed run started
        assert kinds(times.adjustments) == ["retries_exhausted"]
        # the next failure starts a new cycle at retry 1
        task = make_task(**self.failed_periodic(5))
        assert start_times(task, task_type, now=at(0)).can_start_by == at(0) + 5 * MIN

    def test_exhausted_cron_waits_for_the_next_firing(self) -> None:
        task = make_task(
            ScheduleKind.CRON,
            last_good_start_at=at(-33),  # 03:00 yesterday
            last_start_at=at(-9),  # 03:00 today, failed
            last_end_at=at(-8),
            failure_count=1,
        )
        times = start_times(task, make_type(), now=T0)
        assert times.can_start_by == datetime(2024, 6, 4, 3, 0, tzinfo=UTC)
        # should_start_by keeps following the last good run: it is overdue
        assert times.should_start_by == datetime(2024, 6, 3, 5, 0, tzinfo=UTC)

    def test_exhausted_adaptive_waits_one_interval(self) -> None:
        task = make_task(
            ScheduleKind.ADAPTIVE,
            last_good_end_at=at(-30),
            last_good_start_at=at(-31),
            last_start_at=at(-1),
            last_end_at=at(0),
            failure_count=1,
        )
        times = start_times(task, adaptive_type(), now=at(0))
        assert times.can_start_by == at(-1) + DAY

    def test_jitter_is_read_back_from_the_stored_next_run(self) -> None:
        task_type = make_type(num_retries=1, retry_jitter=10 * MIN)
        inside = at(0) + 5 * MIN + 4 * MIN
        task = make_task(**self.failed_periodic(1, next_run=inside))
        assert start_times(task, task_type, now=at(0)).can_start_by == inside
        # a stored value outside the jitter window is clamped into it
        task = make_task(**self.failed_periodic(1, next_run=at(5)))
        assert start_times(task, task_type, now=at(0)).can_start_by == at(0) + 15 * MIN
        # an explicit fraction wins
        forced = compute_start_times(task, task_type, at(0), retry_jitter_fraction=0.5)
        assert forced.can_start_by == at(0) + 10 * MIN


class TestBlackouts:
    def test_can_start_by_moves_should_start_by_does_not(self) -> None:
        task = make_task(
            last_good_start_at=at(-23),  # 13:00 yesterday
            last_good_end_at=at(-22),  # 14:00 yesterday
            blackout_periods=(window("13:00", "15:00"),),
        )
        times = start_times(task, make_type(), now=at(-21))
        assert times.can_start_by == at(-21)  # 15:00 yesterday
        assert times.should_start_by == at(1)
        assert kinds(times.adjustments) == ["blackout"]
        assert times.adjustments[0].moved_from == at(-22)

    def test_now_inside_a_window_holds_a_ready_task(self) -> None:
        task = make_task(
            last_good_start_at=at(-30),
            last_good_end_at=at(-29),
            blackout_periods=(window("12:00", "13:00"),),
        )
        times = start_times(task, make_type(), now=at(0.5))
        assert times.can_start_by == at(1)
        assert times.adjustments[-1].kind is AdjustmentKind.BLACKOUT
        # outside the window, a past can_start_by stays in the past
        assert start_times(task, make_type(), now=at(2)).can_start_by == at(-29)

    def test_retry_then_blackout(self) -> None:
        task = make_task(
            last_good_start_at=at(-20),
            last_good_end_at=at(-19),
            last_start_at=at(-1),
            last_end_at=at(0),
            failure_count=1,
            blackout_periods=(window("12:00", "13:00"),),
        )
        times = start_times(task, make_type(num_retries=2), now=at(0))
        assert times.can_start_by == at(1)
        assert kinds(times.adjustments) == ["retry_backoff", "blackout"]

    def test_start_times_is_stable_when_stored_back(self) -> None:
        task = make_task(
            last_good_start_at=at(-23),
            last_good_end_at=at(-22),
            blackout_periods=(window("13:00", "15:00"),),
        )
        first = start_times(task, make_type(), now=at(-22))
        stored = task.updated(next_run=first.can_start_by, deadline=first.should_start_by)
        again = start_times(stored, make_type(), now=at(-22))
        assert (again.can_start_by, again.should_start_by) == (
            first.can_start_by,
            first.should_start_by,
        )


def test_result_instants_are_utc() -> None:
    task = make_task(ScheduleKind.CRON, tz="Pacific/Chatham")
    times = start_times(task, make_type(), now=T0)
    assert times.can_start_by.utcoffset() == timedelta(0)
    assert times.should_start_by.utcoffset() == timedelta(0)
