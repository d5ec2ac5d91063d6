"""``level_holds_until``: the level really holds up to the instant it names."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import HOUR, MIN, T0, adaptive_type, at, make_task

from swh_like_scheduler.domain.model import ScheduleKind, TaskStatus
from swh_like_scheduler.policy import condition, level_holds_until

offsets = st.integers(min_value=-72 * 60, max_value=72 * 60).map(lambda m: m * MIN)
maybe = st.one_of(st.none(), offsets)


@st.composite
def tasks(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    kind = draw(st.sampled_from(list(ScheduleKind)))
    changes = {}
    good_start = draw(maybe)
    if good_start is not None:
        changes["last_good_start_at"] = T0 + good_start
        changes["last_good_end_at"] = T0 + good_start + draw(offsets).__abs__()
    started = draw(maybe)
    if started is not None:
        changes["owner_started_at"] = T0 + started
        changes["status"] = TaskStatus.SCHEDULED
    if draw(st.booleans()):
        changes["average_good_duration"] = draw(st.integers(1, 300)) * MIN
    changes["failure_count"] = draw(st.integers(0, 2))
    if kind is ScheduleKind.ONESHOT:
        changes["max_delay"] = draw(st.integers(0, 120)) * MIN
    changes["next_run"] = T0 + draw(offsets)
    minutes = st.one_of(st.none(), st.integers(1, 900).map(lambda m: m * MIN))
    changes["max_expected_duration"] = draw(minutes)
    changes["max_allowed_duration"] = draw(minutes)
    return make_task(kind, **changes)


@settings(max_examples=400, deadline=None)
@given(tasks(), offsets, st.lists(st.integers(0, 10_000), min_size=1, max_size=5))
def test_the_level_holds_until_the_instant_given(task, when, steps) -> None:  # type: ignore[no-untyped-def]
    task_type = adaptive_type()
    now = at(0) + when
    level = condition(task, task_type, now).level
    until = level_holds_until(task, task_type, now)
    horizon = until if until is not None else now + 30 * 24 * HOUR
    assert horizon >= now
    span = horizon - now
    for step in steps:
        later = now + span * (step / 10_000)
        assert condition(task, task_type, later).level is level, (later, until)
