"""Catch-up after missed firings: ``latest`` runs once, ``skip`` drops what is
later than the grace (policy.catchup, pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import HOUR, MIN, T0, at, make_task, make_type

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import CatchUp, ScheduleKind, TaskStatus
from swh_like_scheduler.policy import (
    Condition,
    after_skip,
    catch_up_of,
    condition,
    explain,
    missed_firings,
    start_times,
)

SKIP = make_type(catch_up="skip", catch_up_grace=5 * MIN)


def hourly_cron(**changes: object) -> object:
    values: dict[str, object] = {
        "cron": "0 * * * *",
        "cron_max_duration": 30 * MIN,
        "last_good_start_at": at(-6),
        "last_good_end_at": at(-6) + MIN,
        "last_start_at": at(-6),
        "last_end_at": at(-6) + MIN,
        "next_run": at(-5),
        "deadline": at(-5) + 30 * MIN,
    }
    values.update(changes)
    return make_task(ScheduleKind.CRON, **values)


def periodic(**changes: object) -> object:
    values: dict[str, object] = {
        "period": HOUR,
        "cooldown": 50 * MIN,
        "last_good_start_at": at(-6),
        "last_good_end_at": at(-6) + MIN,
        "last_start_at": at(-6),
        "last_end_at": at(-6) + MIN,
        "next_run": at(-6) + 51 * MIN,
        "deadline": at(-5),
    }
    values.update(changes)
    return make_task(ScheduleKind.PERIODIC, **values)


def test_latest_is_the_default_and_never_skips() -> None:
    task_type = make_type()
    assert catch_up_of(hourly_cron(), task_type) == (CatchUp.LATEST, timedelta(minutes=5))
    assert missed_firings(hourly_cron(), task_type, at(0.5)) is None
    assert missed_firings(periodic(), task_type, at(0.5)) is None


def test_the_task_overrides_its_type() -> None:
    task = hourly_cron(catch_up="latest")
    assert missed_firings(task, SKIP, at(0.5)) is None
    task = hourly_cron(catch_up="skip", catch_up_grace=HOUR)
    assert catch_up_of(task, make_type()) == (CatchUp.SKIP, HOUR)
    # 12:30 is within an hour of 12:00: the 12:00 firing still runs
    missed = missed_firings(task, make_type(), at(0.5))
    assert missed is not None and missed.resume_at == at(0)


def test_cron_skip_drops_the_stretch_and_waits_for_the_next_firing() -> None:
    task = hourly_cron()
    now = at(0.5)  # 12:30: firings 07:00 .. 12:00 missed, all > 5 min late
    missed = missed_firings(task, SKIP, now)
    assert missed is not None
    assert (missed.first, missed.count, missed.more, missed.resume_at) == (at(-5), 6, False, at(1))
    assert "6 firings from 2024-06-03T07:00:00+00:00" in missed.reason
    assert "next firing is at 2024-06-03T13:00:00+00:00" in missed.reason
    after = after_skip(task, SKIP, missed, now)
    assert (after.next_run, after.deadline, after.skipped_until) == (at(1), at(1.5), at(1))
    assert after.status is TaskStatus.WAITING
    # recorded once: the same pass, or a later one before 13:00, finds nothing more
    assert missed_firings(after, SKIP, now) is None
    assert missed_firings(after, SKIP, at(0.9)) is None
    # the dropped firings are neither late nor failed
    assert condition(after, SKIP, now).level is Condition.OK
    assert condition(task, SKIP, now).level is Condition.ERROR


def test_cron_firing_within_the_grace_still_runs() -> None:
    task = hourly_cron()
    now = at(0) + 3 * MIN  # 12:03: 12:00 is 3 min late, within 5
    missed = missed_firings(task, SKIP, now)
    assert missed is not None and (missed.count, missed.resume_at) == (5, at(0))
    after = after_skip(task, SKIP, missed, now)
    assert after.next_run == at(0) <= now  # dispatched by this very pass
    assert start_times(after, SKIP, now).should_start_by == at(0.5)


def test_periodic_skip_resumes_on_the_period_grid() -> None:
    task = periodic()
    now = at(0.5)  # due 07:00, 08:00, ... 12:00: all more than 5 min late
    missed = missed_firings(task, SKIP, now)
    assert missed is not None
    assert (missed.first, missed.count, missed.resume_at) == (at(-5), 6, at(1))
    after = after_skip(task, SKIP, missed, now)
    assert (after.next_run, after.deadline) == (at(1), at(1))
    assert condition(after, SKIP, now).level is Condition.OK
    assert condition(task, SKIP, now).level is Condition.ERROR  # stale before the skip
    # a run then served the 13:00 firing: the normal schedule takes over
    served = after.updated(
        last_good_start_at=at(1), last_good_end_at=at(1) + MIN, last_end_at=at(1) + MIN
    )
    times = start_times(served, SKIP, at(1) + MIN)
    assert (times.can_start_by, times.should_start_by) == (at(1) + 51 * MIN, at(2))


def test_periodic_not_due_is_not_skipped_whatever_its_can_start_by() -> None:
    # ready since 06:51 (cooldown) but due only at 07:00: at 07:04 nothing is missed
    assert missed_firings(periodic(), SKIP, at(-5) + 4 * MIN) is None
    assert missed_firings(periodic(), SKIP, at(-5) + 6 * MIN) is not None


def test_adaptive_skip_uses_the_interval() -> None:
    task = make_task(
        ScheduleKind.ADAPTIVE,
        current_interval=HOUR,
        last_good_start_at=at(-7),
        last_good_end_at=at(-7),
        last_end_at=at(-7),
        next_run=at(-6),
        deadline=at(-5),
    )
    missed = missed_firings(task, SKIP, at(0.5))
    assert missed is not None and (missed.first, missed.resume_at) == (at(-5), at(1))


def test_oneshot_skip_disables_a_task_past_max_delay_and_grace() -> None:
    task = make_task(ScheduleKind.ONESHOT, next_run=at(-2), deadline=at(-2) + 10 * MIN)
    task = task.updated(max_delay=10 * MIN)
    assert missed_firings(task, SKIP, at(-2) + 14 * MIN) is None  # within max_delay + grace
    missed = missed_firings(task, SKIP, at(0))
    assert missed is not None and missed.resume_at is None and missed.count == 1
    after = after_skip(task, SKIP, missed, at(0))
    assert after.status is TaskStatus.DISABLED and after.next_run > task.next_run
    assert "one-shot task is disabled" in missed.reason


def test_explain_says_what_was_and_what_will_be_skipped() -> None:
    task = hourly_cron()
    before = explain(task, SKIP, at(0.5))
    assert before.catch_up == "skip" and before.catch_up_grace == "5m"
    assert "next runner pass records this and does not run it" in before.catch_up_note
    missed = missed_firings(task, SKIP, at(0.5))
    assert missed is not None
    after = explain(after_skip(task, SKIP, missed, at(0.5)), SKIP, at(0.5))
    assert "Missed firings were skipped" in after.catch_up_note
    assert "2024-06-03T13:00:00+00:00" in after.catch_up_note
    assert any("Catch-up: skip missed firings later than 5m" in line for line in after.lines())
    assert explain(task, make_type(), at(0.5)).catch_up_note == ""


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"catch_up": "sometimes"}, "catch_up"),
        ({"catch_up_grace": timedelta(0)}, "catch_up_grace"),
        ({"catch_up_grace": -MIN}, "catch_up_grace"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        make_type(**changes)
    assert refused.value.field == field
    with pytest.raises(InvalidInput) as refused:
        make_task(ScheduleKind.PERIODIC, **changes)
    assert refused.value.field == field
    with pytest.raises(InvalidInput) as refused:
        make_task(ScheduleKind.PERIODIC).updated(**changes)
    assert refused.value.field == field


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from([ScheduleKind.CRON, ScheduleKind.PERIODIC]),
    step_minutes=st.sampled_from([1, 5, 15, 60, 24 * 60]),
    outage=st.integers(min_value=0, max_value=3 * 24 * 3600),
    grace=st.integers(min_value=1, max_value=6 * 3600),
)
def test_a_skip_resumes_at_the_first_firing_within_the_grace(
    kind: ScheduleKind, step_minutes: int, outage: int, grace: int
) -> None:
    step = timedelta(minutes=step_minutes)
    task_type = make_type(catch_up="skip", catch_up_grace=timedelta(seconds=grace))
    cron = {1: "* * * * *", 5: "*/5 * * * *", 15: "*/15 * * * *", 60: "0 * * * *"}
    if kind is ScheduleKind.CRON:
        task = hourly_cron(cron=cron.get(step_minutes, "0 12 * * *"), last_good_start_at=T0)
    else:
        task = periodic(period=step, cooldown=None, last_good_start_at=T0)
    task = task.updated(last_good_end_at=T0, last_start_at=T0, last_end_at=T0)
    first = start_times(task, task_type, T0).can_start_by
    if kind is ScheduleKind.PERIODIC:
        first = start_times(task, task_type, T0).should_start_by
    now = first + timedelta(seconds=outage)
    cutoff = now - timedelta(seconds=grace)
    missed = missed_firings(task, task_type, now)
    if first >= cutoff:
        assert missed is None
        return
    assert missed is not None and missed.resume_at is not None
    # the first firing not later than the grace, and no earlier one qualifies
    assert missed.resume_at >= cutoff
    assert missed.resume_at - step < cutoff
    assert missed.first == first
    if not missed.more:
        assert missed.count == round((missed.resume_at - first) / step)
    after = after_skip(task, task_type, missed, now)
    assert after.next_run > task.next_run
    assert missed_firings(after, task_type, now) is None  # once per stretch
    # the dropped firings count for nothing; the firing it resumed at may be
    # due already (within the grace) and is judged as any due firing
    judged = condition(after, task_type, now)
    assert judged.level is Condition.OK or now > missed.resume_at
