"""Editing in place, without a store: raw input to changes, and the task the
policy engine makes of them (``now`` given)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from swh_like_scheduler import policy
from swh_like_scheduler.domain.exceptions import InvalidInput, TaskBusy
from swh_like_scheduler.domain.model import (
    BlackoutPeriod,
    Priority,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.intake.edit import edited_task
from swh_like_scheduler.intake.editing import TASK_EDITABLE, task_changes, task_type_changes

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
H = timedelta(hours=1)
TYPE = TaskType(type="t", backend_name="t.run", default_interval=H)


def periodic(**fields: object) -> Task:
    draft = Task(
        type="t",
        next_run=NOW,
        deadline=NOW,
        schedule_kind=ScheduleKind.PERIODIC,
        period=H,
        created_at=NOW,
        **fields,
    )  # type: ignore[arg-type]
    return policy.prepare_new_task(draft, TYPE, NOW)


def test_raw_input_becomes_typed_changes() -> None:
    changes = task_changes(
        {
            "kind": "cron",
            "cron": "0 3 * * *",
            "interval": "none",
            "priority": "low",
            "blackout_periods": '[{"start": "23:00", "end": "01:00"}]',
            "dont_run_on_nodes": "a, b",
            "kwargs": '{"n": 1}',
            "reset_retries": "yes",
            "max_delay": "null",
        }
    )
    assert changes == {
        "schedule_kind": ScheduleKind.CRON,
        "cron": "0 3 * * *",
        "current_interval": None,
        "priority": Priority.LOW,
        "blackout_periods": (BlackoutPeriod(time(23), time(1)),),
        "dont_run_on_nodes": ("a", "b"),
        "kwargs": {"n": 1},
        "failure_count": 0,
        "max_delay": None,
    }
    for values, field in (
        ({"type": "x"}, "type"),
        ({"priority": "urgent"}, "priority"),
        ({"period": "soon"}, "period"),
        ({"tz": "none"}, "tz"),
        ({"args": "{}"}, "args"),
        ({"reset_retries": "no"}, "reset_retries"),
    ):
        with pytest.raises(InvalidInput) as info:
            task_changes(values)
        assert info.value.field == field
    assert task_type_changes({"queue": "none", "num_retries": "3", "uses_lease": "false"}) == {
        "queue": None,
        "num_retries": 3,
        "uses_lease": False,
    }
    with pytest.raises(InvalidInput) as info:
        task_type_changes({"paused_at": None})
    assert info.value.field == "paused_at"


def test_a_blackout_edit_moves_can_start_by_past_the_window_at_now() -> None:
    task = periodic()
    at = NOW + timedelta(minutes=30)  # 12:30, inside the new 12:00-14:00 window
    changes = {"blackout_periods": (BlackoutPeriod(time(12), time(14)),)}
    edited = edited_task(task, TYPE, changes, at)
    assert edited.next_run == NOW + 2 * H and edited.deadline == task.deadline
    assert edited_task(task, TYPE, {}, at) is task


def test_every_idle_field_is_refused_while_held_and_the_others_keep_the_times() -> None:
    task = periodic(args=(1,)).updated(status=TaskStatus.SCHEDULED)
    samples = {
        "schedule_kind": ScheduleKind.ADAPTIVE,
        "max_delay": H,
        "args": (2,),
        "kwargs": {"a": 1},
        "dont_run_on_nodes": ("n",),
        "max_allowed_duration": H,
    }
    for name, applies in TASK_EDITABLE.items():
        if applies == "idle":
            with pytest.raises(TaskBusy) as info:
                edited_task(task, TYPE, {name: samples[name]}, NOW)
            assert info.value.field == name
    edited = edited_task(task, TYPE, {"period": 3 * H, "tz": "Europe/Paris"}, NOW + H)
    assert (edited.next_run, edited.deadline, edited.period) == (
        task.next_run,
        task.deadline,
        3 * H,
    )
