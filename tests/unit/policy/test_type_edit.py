"""What an edit of a task type does to its tasks (:mod:`policy.type_edit`)."""

from __future__ import annotations

from policy_helpers import DAY, HOUR, MIN, T0, adaptive_type, make_type

from swh_like_scheduler.domain.model import ScheduleKind
from swh_like_scheduler.policy.type_edit import TaskShape, assess_type_edit


def periodic(period: float, count: int = 1, example: int = 1) -> TaskShape:
    return TaskShape(ScheduleKind.PERIODIC, count, example, period=period * MIN)


def adaptive(interval: float, count: int = 1, example: int = 1) -> TaskShape:
    return TaskShape(ScheduleKind.ADAPTIVE, count, example, current_interval=interval * HOUR)


def test_retries_that_no_longer_fit_a_period_break_those_tasks_and_name_the_setting() -> None:
    current = make_type()
    updated = current.updated(num_retries=2)  # 5 min + 1 h
    shapes = [periodic(5, count=3, example=7), periodic(24 * 60, count=10, example=2)]
    report = assess_type_edit(current, updated, ["num_retries"], shapes, T0)
    assert report.tasks == 13
    [broken] = report.breaks
    assert (broken.field, broken.count, broken.example) == ("period", 3, 7)
    assert "1h05m" in broken.detail and "5m" in broken.detail
    refusal = report.refusal()
    assert refusal is not None and refusal.field == "num_retries"
    assert "3 of the 13 tasks" in refusal.message and "task 7" in refusal.message


def test_a_task_already_breaking_a_rule_is_not_the_edits_doing() -> None:
    current = make_type(num_retries=2)  # the 5-minute task predates a rule
    updated = current.updated(description="renamed")
    report = assess_type_edit(current, updated, ["description"], [periodic(5)], T0)
    assert report.breaks == () and report.refusal() is None


def test_an_adaptive_type_whose_floor_is_under_its_retries_breaks_every_adaptive_task() -> None:
    current = adaptive_type(min_interval=10 * MIN, max_interval=DAY, default_interval=HOUR)
    updated = current.updated(num_retries=2)
    shapes = [adaptive(1, count=4, example=3), adaptive(12, count=1, example=9)]
    report = assess_type_edit(current, updated, ["num_retries"], shapes, T0)
    [broken] = report.breaks
    # the bound is the type's min_interval, whatever interval each task has
    assert (broken.field, broken.count, broken.example) == ("min_interval", 5, 3)
    assert "whatever their interval" in broken.detail


def test_new_bounds_move_intervals_and_break_nothing() -> None:
    current = adaptive_type(min_interval=HOUR, max_interval=4 * DAY, default_interval=DAY)
    updated = current.updated(max_interval=2 * DAY)
    shapes = [adaptive(72, count=2, example=5), adaptive(24, count=6, example=1)]
    report = assess_type_edit(current, updated, ["max_interval"], shapes, T0)
    assert report.breaks == ()
    [moved] = report.moves
    assert (moved.count, moved.example) == (2, 5)
    assert "lowered" in moved.detail and "2d" in moved.detail


def test_a_type_with_no_task_gets_a_warning_about_new_adaptive_tasks_not_a_refusal() -> None:
    current = adaptive_type(min_interval=10 * MIN, max_interval=DAY, default_interval=HOUR)
    updated = current.updated(num_retries=2)
    report = assess_type_edit(current, updated, ["num_retries"], [], T0)
    assert report.tasks == 0 and report.breaks == () and report.refusal() is None
    assert report.new_tasks is not None and report.new_tasks.startswith("min_interval")
    assert any("warning" in line for line in report.lines())


def test_durations_of_the_type_are_judged_with_each_tasks_own() -> None:
    current = make_type(max_allowed_duration=2 * HOUR)
    updated = current.updated(max_allowed_duration=30 * MIN)
    own = TaskShape(ScheduleKind.ONESHOT, 2, 4, max_expected_duration=HOUR)
    plain = TaskShape(ScheduleKind.ONESHOT, 5, 1)
    report = assess_type_edit(current, updated, ["max_allowed_duration"], [own, plain], T0)
    [broken] = report.breaks
    assert (broken.field, broken.count, broken.example) == ("max_expected_duration", 2, 4)
