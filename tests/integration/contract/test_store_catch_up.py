"""Contract: skip_missed_firings drops a stretch of missed firings once, and
the task-type and task settings of catch-up are stored and read back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from swh_like_scheduler.domain.model import CatchUp, RunStatus, TaskStatus, TaskType
from swh_like_scheduler.intake.builders import task_from_input

T0 = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
H = timedelta(hours=1)


def test_settings_are_stored(store: Any) -> None:
    made = store.create_task_type(
        TaskType(type="ct", backend_name="x.y", catch_up="skip", catch_up_grace=7 * H)
    )
    assert store.get_task_type("ct") == made
    assert (made.catch_up, made.catch_up_grace) == (CatchUp.SKIP, 7 * H)
    values = {"kind": "cron", "cron": "0 * * * *", "catch_up": "latest", "catch_up_grace": "1m"}
    [task] = store.create_tasks([task_from_input(values, made, now=T0)], now=T0)
    [read] = store.get_tasks([task.id])
    assert (read.catch_up, read.catch_up_grace, read.skipped_until) == (
        CatchUp.LATEST,
        timedelta(minutes=1),
        None,
    )


def test_missed_firings_are_skipped_once(store: Any) -> None:
    kind = store.create_task_type(
        TaskType(
            type="cs", backend_name="x.y", catch_up="skip", catch_up_grace=10 * timedelta(minutes=1)
        )
    )
    other = store.create_task_type(TaskType(type="cl", backend_name="x.y"))
    cron = task_from_input({"kind": "cron", "cron": "0 * * * *"}, kind, now=T0)
    own = task_from_input(
        {"kind": "cron", "cron": "0 * * * *", "catch_up": "skip", "args": [1]}, other, now=T0
    )
    plain = task_from_input({"kind": "cron", "cron": "0 * * * *", "args": [2]}, other, now=T0)
    [task] = store.create_tasks([cron], now=T0)
    made = {t.args: t for t in store.create_tasks([own, plain], now=T0)}
    mine, theirs = made[(1,)], made[(2,)]
    now = T0 + 6 * H + 30 * timedelta(minutes=1)
    assert store.skip_missed_firings("cs", now=T0 + H) == []  # on time
    [skip] = store.skip_missed_firings("cs", now=now)
    assert skip.task.id == task.id and skip.count == 6 and skip.resume_at == T0 + 7 * H
    assert skip.run.status is RunStatus.SKIPPED and skip.run.slot == T0 + H
    assert store.skip_missed_firings("cs", now=now) == []
    [read] = store.get_tasks([task.id])
    assert (read.next_run, read.skipped_until, read.status) == (
        T0 + 7 * H,
        T0 + 7 * H,
        TaskStatus.WAITING,
    )
    [run] = store.get_task_runs(task.id)
    assert run.status is RunStatus.SKIPPED and run.error == skip.run.error
    # a task's own setting is found in a "latest" type; its siblings are left
    [own_skip] = store.skip_missed_firings("cl", now=now)
    assert own_skip.task.id == mine.id
    assert store.get_task_runs(theirs.id) == []
    # a paused type is left alone
    store.pause_task_type("cs", now=now)
    later = T0 + 12 * H
    assert store.skip_missed_firings("cs", now=later) == []
    store.resume_task_type("cs")
    assert len(store.skip_missed_firings("cs", now=later)) == 1
