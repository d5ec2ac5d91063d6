"""The store contract of editing in place (``edit_task``, ``update_task_type``):
against SQLite, PostgreSQL, PostgreSQL with the Redis index (which must
file the new times) and the remote store."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler import policy
from swh_like_scheduler.domain.exceptions import (
    Conflict,
    DuplicateTask,
    InvalidInput,
    InvalidTransition,
    NotFound,
    TaskBusy,
)
from swh_like_scheduler.domain.model import (
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.intake.editing import task_changes, task_type_changes
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier

H = timedelta(hours=1)
M = timedelta(minutes=1)


def add(store: Any, task_type: TaskType, now: datetime, **values: Any) -> Task:
    [task] = store.create_tasks([task_from_input(values, task_type, now=now)], now=now)
    return task


def run_once(store: Any, task: Task, start: datetime, end: datetime, status: RunStatus) -> Task:
    """Claim, start and end one run of ``task`` with the listener's outcome policy."""
    [claimed] = store.claim_ready_tasks(task.type, now=start, limit=1)
    assert claimed.task_id == task.id
    store.start_task_run(claimed.backend_id, started=start, worker="w")
    store.end_task_run(
        claimed.backend_id,
        status=status,
        ended=end,
        apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
    )
    return store.get_tasks([task.id])[0]


def agrees_with_policy(task: Task, task_type: TaskType, now: datetime) -> None:
    times = policy.start_times(task, task_type, now)
    assert (task.next_run, task.deadline) == (times.can_start_by, times.should_start_by)


def test_a_new_period_keeps_the_last_good_run_as_anchor(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    task = add(store, sleep_type, now, period="1h", args=[1])
    ran = run_once(store, task, now, now + 10 * M, RunStatus.EVENTFUL)
    at = now + 20 * M
    edited = store.edit_task(task_id=task.id, changes=task_changes({"period": "3h"}), now=at)
    assert edited.period == 3 * H
    # the default cooldown (0.9 x period less twice the run time) followed
    # the run of 10 min, then follows the new period
    assert task.cooldown == 54 * M and ran.cooldown == 34 * M and edited.cooldown == 142 * M
    assert edited.cooldown_is_default
    # can_start_by: the good run's end + cooldown; should: its start + 3h - 10 min
    assert edited.next_run == now + 10 * M + 142 * M
    assert edited.deadline == now + 3 * H - 10 * M
    agrees_with_policy(edited, sleep_type, at)
    assert edited.last_good_start_at == ran.last_good_start_at == now
    assert edited.updated_at == at and edited.status is TaskStatus.WAITING
    assert store.get_tasks([task.id]) == [edited]
    again = store.edit_task(task_id=task.id, changes={"cooldown": 30 * M}, now=at)
    assert again.next_run == now + 40 * M  # the end of the good run + the cooldown
    assert not again.cooldown_is_default
    agrees_with_policy(again, sleep_type, at)
    # an explicit cooldown stays when the period changes again
    longer = store.edit_task(task_id=task.id, changes={"period": 4 * H}, now=at)
    assert longer.cooldown == 30 * M
    # a task made periodic without a cooldown gets the default
    cron = add(store, sleep_type, now, cron="0 * * * *", key="made-periodic")
    made = store.edit_task(
        task_id=cron.id, changes=task_changes({"kind": "periodic", "period": "2h"}), now=at
    )
    assert (made.schedule_kind, made.cooldown) == (ScheduleKind.PERIODIC, 108 * M)


def test_a_new_cron_expression_fires_after_the_last_good_start(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    task = add(store, sleep_type, now, cron="0 * * * *", key="hourly")
    assert task.next_run == now + H
    at = now + 10 * M
    edited = store.edit_task(key="hourly", changes=task_changes({"cron": "30 * * * *"}), now=at)
    assert edited.cron == "30 * * * *" and edited.next_run == now + 30 * M
    assert edited.deadline == now + 30 * M + H  # cron_max_duration: the 1 h gap
    agrees_with_policy(edited, sleep_type, at)
    # a zone moves the firings of the same expression (in winter Paris is UTC+1)
    moved = store.edit_task(key="hourly", changes=task_changes({"tz": "Europe/Paris"}), now=at)
    assert moved.next_run == now + 30 * M  # minute 30 is minute 30 in Paris as well
    daily = store.edit_task(key="hourly", changes=task_changes({"cron": "0 15 * * *"}), now=at)
    assert daily.next_run == now + 2 * H  # 15:00 in Paris is 14:00 UTC


def test_changing_the_kind_clears_the_old_parameters(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    task = add(store, sleep_type, now, period="1h", cooldown="10m", args=[2])
    changes = task_changes({"kind": "cron", "cron": "0 3 * * *"})
    cron = store.edit_task(task_id=task.id, changes=changes, now=now)
    assert (cron.schedule_kind, cron.period, cron.cooldown) == (ScheduleKind.CRON, None, None)
    assert cron.cron_max_duration == 24 * H and cron.next_run == now + 15 * H
    agrees_with_policy(cron, sleep_type, now)
    at = now + 2 * H
    adaptive = store.edit_task(task_id=task.id, changes=task_changes({"kind": "adaptive"}), now=at)
    assert adaptive.current_interval == sleep_type.default_interval and adaptive.cron is None
    agrees_with_policy(adaptive, sleep_type, at)
    oneshot = store.edit_task(
        task_id=task.id, changes=task_changes({"kind": "oneshot", "max_delay": "1h"}), now=at
    )
    assert oneshot.schedule_kind is ScheduleKind.ONESHOT and oneshot.current_interval is None
    assert (oneshot.next_run, oneshot.deadline) == (adaptive.next_run, adaptive.next_run + H)
    agrees_with_policy(oneshot, sleep_type, at)


def test_a_refused_edit_names_the_field_and_writes_nothing(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    task = add(store, sleep_type, now, period="1h", args=[3])
    refusals = [
        ({"cooldown": timedelta(hours=2)}, "cooldown"),  # not shorter than the period
        ({"max_delay": H}, "max_delay"),  # not a periodic task's
        ({"schedule_kind": ScheduleKind.CRON}, "cron"),  # a cron task needs one
        ({"tz": "Mars/Olympus"}, "tz"),
        ({"period": timedelta(0)}, "period"),
        ({"max_expected_duration": 2 * H, "max_allowed_duration": H}, "max_expected_duration"),
        ({"type": "other"}, "type"),
        ({"failure_count": 3}, "reset_retries"),
    ]
    for changes, field in refusals:
        with pytest.raises(InvalidInput) as info:
            store.edit_task(task_id=task.id, changes=changes, now=now)
        assert info.value.field == field, changes
    assert store.get_tasks([task.id]) == [task]
    with pytest.raises(NotFound):
        store.edit_task(task_id=10**9, changes={"period": H}, now=now)
    with pytest.raises(NotFound):
        store.edit_task(key="nobody", changes={"period": H}, now=now)
    with pytest.raises(InvalidInput):
        store.edit_task(task_id=task.id, key="both", changes={"period": H}, now=now)


def test_while_a_run_holds_the_task_only_next_run_fields_change(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    task = add(store, sleep_type, now, period="1h", args=[4])
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)
    store.start_task_run(claimed.backend_id, started=now, worker="w")
    held = store.get_tasks([task.id])[0]
    for changes in ({"args": (5,)}, {"schedule_kind": ScheduleKind.ADAPTIVE}):
        with pytest.raises(TaskBusy) as info:
            store.edit_task(task_id=task.id, changes=changes, now=now)
        assert info.value.field == next(iter(changes)) and "holds task" in str(info.value)
        assert isinstance(info.value, InvalidTransition) and isinstance(info.value, Conflict)
    assert store.get_tasks([task.id]) == [held]
    # the same arguments are no change: accepted
    assert store.edit_task(task_id=task.id, changes={"args": (4,)}, now=now) == held
    edited = store.edit_task(
        task_id=task.id, changes={"period": 2 * H, "priority": Priority.HIGH}, now=now + M
    )
    assert edited.status is TaskStatus.SCHEDULED and edited.period == 2 * H
    assert (edited.next_run, edited.deadline) == (held.next_run, held.deadline)
    # the run's outcome computes the times with the new period
    store.end_task_run(
        claimed.backend_id,
        status=RunStatus.EVENTFUL,
        ended=now + 5 * M,
        apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
    )
    after = store.get_tasks([task.id])[0]
    assert after.deadline == now + 2 * H - 5 * M
    assert store.edit_task(task_id=task.id, changes={"args": (5,)}, now=now + H).args == (5,)


def test_arguments_that_would_duplicate_a_live_task_are_refused(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    a = add(store, sleep_type, now, period="1h", args=[1])
    b = add(store, sleep_type, now, period="1h", args=[2])
    with pytest.raises(DuplicateTask) as info:
        store.edit_task(task_id=b.id, changes=task_changes({"args": "[1]"}), now=now)
    assert info.value.field == "args" and info.value.task_id == a.id
    assert str(a.id) in str(info.value)
    assert store.get_tasks([b.id]) == [b]
    # another priority makes another task; then a priority change would collide
    c = store.edit_task(task_id=b.id, changes={"args": (1,), "priority": Priority.HIGH}, now=now)
    with pytest.raises(DuplicateTask) as info:
        store.edit_task(task_id=c.id, changes={"priority": Priority.NORMAL}, now=now)
    assert info.value.field == "priority"
    # a key makes a task its own: the same arguments are allowed
    keyed = add(store, sleep_type, now, period="1h", args=[9], key="k")
    assert store.edit_task(key="k", changes={"args": (1,)}, now=now).id == keyed.id
    # so is a task that is not live
    store.disable_tasks([a.id], now=now)
    d = add(store, sleep_type, now, period="1h", args=[7])
    assert store.edit_task(task_id=d.id, changes={"args": (1,)}, now=now).args == (1,)


def test_reset_retries_and_a_one_shot_keeps_its_instant(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    store.update_task_type("sleep", num_retries=2, retry_delay=10 * M)
    task = add(store, sleep_type, now, policy="oneshot", max_delay="1h", args=[6])
    failed = run_once(store, task, now, now + M, RunStatus.FAILED)
    assert failed.failure_count == 1 and failed.next_run == now + 11 * M
    longer = store.edit_task(task_id=task.id, changes=task_changes({"max_delay": "3h"}), now=now)
    assert longer.deadline == now + 3 * H and longer.next_run == now + 11 * M  # still a retry
    reset = store.edit_task(
        task_id=task.id, changes=task_changes({"reset_retries": True}), now=now + 2 * M
    )
    assert (reset.failure_count, reset.retries_left) == (0, 2)
    assert reset.next_run == now and reset.deadline == now + 3 * H  # the instant asked for


def test_update_task_type_fields_and_the_open_run_rule(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    changes = task_type_changes(
        {"description": "naps", "max_queue_length": "none", "retry_jitter": "30s"}
    )
    updated = store.update_task_type("sleep", **changes)
    assert (updated.description, updated.max_queue_length) == ("naps", None)
    assert updated.retry_jitter == timedelta(seconds=30)
    assert store.get_task_type("sleep") == updated
    with pytest.raises(InvalidInput) as info:
        store.update_task_type("sleep", min_interval=timedelta(days=2))  # > max_interval
    assert info.value.field == "min_interval"
    with pytest.raises(InvalidInput) as info:
        store.update_task_type("sleep", paused_at=None)
    assert info.value.field == "paused_at"
    add(store, sleep_type, now, period="1h", args=[8])
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)
    for field, value in (("queue", "other"), ("backend_name", "workers.other")):
        with pytest.raises(TaskBusy) as busy:
            store.update_task_type("sleep", **{field: value})
        assert busy.value.field == field and "1 run(s)" in str(busy.value)
    assert store.get_task_type("sleep") == updated
    # a setting its open run does not carry may change meanwhile
    assert store.update_task_type("sleep", num_retries=1).num_retries == 1
    store.end_task_run(claimed.backend_id, status=RunStatus.LOST, ended=now)
    moved = store.update_task_type("sleep", queue="other", backend_name="workers.other")
    assert (moved.effective_queue, moved.backend_name) == ("other", "workers.other")
    unset = store.update_task_type("sleep", **task_type_changes({"queue": "none"}))
    assert unset.effective_queue == "workers.other"


def test_a_type_edit_that_would_break_its_tasks_is_refused_and_previewed(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    # the type's floor (10 min) is under 2 retries (5 min + 1 h): every
    # adaptive task would break, and so would a 5-minute periodic one
    every_5 = add(store, sleep_type, now, period="5m", args=[1])
    adaptive = [add(store, sleep_type, now, interval="1h", args=[n]) for n in (2, 3)]
    daily = add(store, sleep_type, now, period="1d", args=[4])
    store.disable_tasks([adaptive[1].id], now=now)  # disabled: still governed
    report = store.preview_task_type_update("sleep", now=now, num_retries=2)
    assert report.tasks == 4 and report.given == ("num_retries",)
    found = {(b.field, b.count, b.example) for b in report.breaks}
    assert found == {("period", 1, every_5.id), ("min_interval", 2, adaptive[0].id)}
    with pytest.raises(InvalidInput) as info:
        store.update_task_type("sleep", now=now, num_retries=2)
    assert info.value.field == "num_retries"
    assert "3 of the 4 tasks" in info.value.message
    assert store.get_task_type("sleep") == sleep_type  # nothing written
    # a higher floor moves the 1-hour intervals up (at their next run)
    floor = {"min_interval": 2 * H, "default_interval": 2 * H}
    [moved] = store.preview_task_type_update("sleep", now=now, **floor).moves
    assert (moved.count, moved.example) == (2, adaptive[0].id) and "raised" in moved.detail
    store.update_task_type("sleep", now=now, **floor)
    # with the floor raised and the 5-minute task gone, the edit is taken
    store.delete_tasks([every_5.id])
    report = store.preview_task_type_update("sleep", now=now, num_retries=2)
    assert report.breaks == () and report.tasks == 3 and report.refusal() is None
    assert store.update_task_type("sleep", now=now, num_retries=2).num_retries == 2
    assert daily.id in {t.id for t in store.get_tasks([daily.id])}


def test_new_bounds_move_adaptive_intervals_and_are_taken(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    tasks = [add(store, sleep_type, now, interval="20h", args=[n]) for n in (1, 2)]
    add(store, sleep_type, now, interval="1h", args=[3])
    report = store.preview_task_type_update("sleep", now=now, max_interval=12 * H)
    assert report.breaks == ()
    [moved] = report.moves
    assert (moved.field, moved.count, moved.example) == ("current_interval", 2, tasks[0].id)
    assert "lowered" in moved.detail
    assert store.update_task_type("sleep", now=now, max_interval=12 * H).max_interval == 12 * H


def test_a_retry_policy_edit_moves_the_stored_times_of_waiting_retries(
    store: Any, now: datetime
) -> None:
    """On every store (the indexed one rebuilds the type's index, which the
    contract's drift check then spares): a task awaiting a retry is due when
    the new policy says, and a claim at that time takes it."""
    minutes = timedelta(minutes=1)
    task_type = store.create_task_type(
        TaskType(
            type="nap",
            backend_name="workers.nap",
            num_retries=2,
            retry_delay=50 * minutes,
            retry_growth=1.0,
        )
    )
    [task] = store.create_tasks(
        [task_from_input({"period": "2h", "args": [1]}, task_type, now=now)], now=now
    )
    [claimed] = store.claim_ready_tasks("nap", now=now, limit=1)
    store.start_task_run(claimed.backend_id, started=now, worker="w")
    store.end_task_run(
        claimed.backend_id,
        status=RunStatus.FAILED,
        ended=now + 90 * minutes,
        apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
    )
    assert store.get_tasks([task.id])[0].next_run == now + 140 * minutes
    store.update_task_type("nap", now=now + 91 * minutes, retry_delay=20 * minutes)
    moved = store.get_tasks([task.id])[0]
    assert moved.next_run == now + 110 * minutes
    assert store.ready_task_ids("nap", now=moved.next_run - timedelta(seconds=1), limit=5) == []
    assert store.ready_task_ids("nap", now=moved.next_run, limit=5) == [task.id]
