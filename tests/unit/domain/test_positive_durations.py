"""Durations that cannot be 0 (an interval, a period, a time allowed) are
refused with their field's name, from raw input and in the model; a cooldown
or a delay of 0 is a choice and is kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.intake.builders import task_from_input, task_type_from_input

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
SLEEP = TaskType(type="sleep", backend_name="sleep", default_interval=timedelta(hours=1))


def refused(values: dict[str, object]) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        task_from_input(values, SLEEP, now=NOW)
    return caught.value


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"interval": "0"}, "interval"),
        ({"interval": 0}, "interval"),
        ({"interval": "0s"}, "interval"),
        ({"period": "0"}, "period"),
        ({"period": "PT0S"}, "period"),
        ({"cron": "0 3 * * *", "cron_max_duration": "0"}, "cron_max_duration"),
        ({"period": "1h", "max_allowed_duration": "0"}, "max_allowed_duration"),
        ({"period": "1h", "max_expected_duration": "0 s"}, "max_expected_duration"),
        ({"period": "-5"}, "period"),
        ({"interval": "-1h"}, "interval"),
    ],
)
def test_a_task_duration_that_cannot_be_zero(values: dict[str, object], field: str) -> None:
    error = refused(values)
    assert error.field == field
    assert "longer than zero" in str(error) or "negative" in str(error)


def test_interval_zero_is_not_replaced_by_the_type_default() -> None:
    # it was: 0 read as "not given", and the task ran hourly
    assert refused({"interval": timedelta(0)}).field == "interval"
    task = task_from_input({}, SLEEP, now=NOW)
    assert task.current_interval == timedelta(hours=1)


def test_zero_is_kept_where_it_means_something() -> None:
    periodic = task_from_input({"period": "1h", "cooldown": "0"}, SLEEP, now=NOW)
    assert periodic.cooldown == timedelta(0)
    oneshot = task_from_input({"policy": "oneshot", "max_delay": 0}, SLEEP, now=NOW)
    assert oneshot.max_delay == timedelta(0)


@pytest.mark.parametrize(
    "name",
    [
        "default_interval",
        "min_interval",
        "max_interval",
        "max_expected_duration",
        "max_allowed_duration",
    ],
)
def test_a_task_type_duration_that_cannot_be_zero(name: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        task_type_from_input({"type": "t", "backend_name": "b", name: "0"})
    assert caught.value.field == name
    with pytest.raises(InvalidInput) as caught:
        TaskType(type="t", backend_name="b", **{name: timedelta(0)})  # type: ignore[arg-type]
    assert caught.value.field == name


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        (ScheduleKind.PERIODIC, "period"),
        (ScheduleKind.ADAPTIVE, "current_interval"),
        (ScheduleKind.CRON, "cron_max_duration"),
        (ScheduleKind.PERIODIC, "max_allowed_duration"),
        (ScheduleKind.PERIODIC, "max_expected_duration"),
    ],
)
def test_the_model_refuses_them_too(kind: ScheduleKind, name: str) -> None:
    fields: dict[str, object] = {
        ScheduleKind.PERIODIC: {"period": timedelta(hours=1)},
        ScheduleKind.ADAPTIVE: {"current_interval": timedelta(hours=1)},
        ScheduleKind.CRON: {"cron": "0 3 * * *", "cron_max_duration": timedelta(hours=1)},
    }[kind]
    fields[name] = timedelta(0)
    with pytest.raises(InvalidInput) as caught:
        Task(type="sleep", next_run=NOW, deadline=NOW, schedule_kind=kind, **fields)  # type: ignore[arg-type]
    assert caught.value.field == name
    task = Task(
        type="sleep",
        next_run=NOW,
        deadline=NOW,
        schedule_kind=kind,
        **{**fields, name: timedelta(minutes=1)},  # type: ignore[arg-type]
    )
    with pytest.raises(InvalidInput) as caught:
        task.updated(**{name: timedelta(0)})
    assert caught.value.field == name
