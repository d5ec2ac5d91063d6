"""A live task copied into a forecast's own store (``live._copy``) is the
task the checked path (``Task.updated``) would build: same fields, same
arguments' hash and size, with or without a new interval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.model import OWNER_CLEARED, Task, TaskStatus, TaskType
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.policy import start_times
from swh_like_scheduler.simulator.live import _copy

NOW = datetime(2026, 3, 2, 0, 30, tzinfo=UTC)
TYPE = TaskType(type="job", backend_name="job", default_interval=timedelta(hours=6))

LIVE = [
    {"kind": "adaptive", "interval": "2 h", "args": ["https://example.org/a"], "key": "a"},
    {"kind": "periodic", "period": "4 h", "kwargs": {"url": "x", "deep": [1, {"b": 2}]}},
    {
        "kind": "cron",
        "cron": "0 * * * *",
        "cron_max_duration": "10 min",
        "tz": "Europe/Paris",
        "blackout_periods": [{"start": "23:00", "end": "01:00"}],
        "dont_run_on_nodes": ["node-1"],
    },
    {"kind": "oneshot", "args": [1, 2, 3]},
]


def checked(task: Task, index: int, interval: timedelta | None) -> Task:
    """The same copy through every check, as it was built before."""
    copied = task.updated(
        id=None,
        key=None,
        args=(0, index),
        kwargs={},
        status=TaskStatus.WAITING,
        **OWNER_CLEARED,
        dont_run_on_nodes=(),
    )
    if interval is not None and task.schedule_kind.value == "adaptive":
        copied = copied.updated(current_interval=interval)
        times = start_times(copied, TYPE, NOW)
        copied = copied.updated(next_run=times.can_start_by, deadline=times.should_start_by)
    return copied


@pytest.mark.parametrize("values", LIVE, ids=lambda v: v["kind"])
@pytest.mark.parametrize("interval", [None, timedelta(minutes=30)])
def test_the_copy_is_the_checked_copy(
    values: dict[str, object], interval: timedelta | None
) -> None:
    live = task_from_input({"next_run": NOW.isoformat(), **values}, TYPE, now=NOW)
    live = live.updated(
        id=41, status=TaskStatus.SCHEDULED, owner_node="n", owner_started_at=NOW, retries_left=2
    )
    fast, slow = _copy(live, TYPE, 7, interval, NOW), checked(live, 7, interval)
    assert fast == slow
    assert fast.arguments_hash == slow.arguments_hash
    fast.check_arguments_size(len('{"args":[0,7],"kwargs":{}}'))
    with pytest.raises(Exception, match="bytes of JSON"):
        fast.check_arguments_size(5)
    assert fast.id is None and fast.key is None and fast.status is TaskStatus.WAITING
    assert fast.owner_node is None and fast.dont_run_on_nodes == ()
