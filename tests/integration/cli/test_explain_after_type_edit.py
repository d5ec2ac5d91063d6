"""``task explain`` and the runner agree on when a task may start after its
type's retry policy was edited while the task awaited a retry (issue 43):
the edit computes again the stored times of the tasks it moves, and the
readiness explain states at each instant is whether the store hands the
task to a claim then. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from typing import Any

from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import RunStatus, Task, TaskStatus, TaskType
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore

M = timedelta(minutes=1)
S = timedelta(seconds=1)
H = timedelta(hours=1)


def failing_task(store: SQLAlchemyStore, now: datetime) -> tuple[TaskType, Task]:
    """A 2-hour periodic task of a type with 2 retries 50 minutes apart, whose
    first run (now, for 90 minutes) failed: it awaits retry 1 at now + 140
    min, later than its next regular run (its failed start + 2 h)."""
    task_type = store.create_task_type(
        TaskType(
            type="nap",
            backend_name="workers.nap",
            num_retries=2,
            retry_delay=50 * M,
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
        ended=now + 90 * M,
        apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
    )
    [task] = store.get_tasks([task.id or 0])
    assert (task.failure_count, task.status) == (1, TaskStatus.WAITING)
    assert task.next_run == now + 140 * M
    return task_type, task


def cli(db_url: str, *words: str) -> str:
    """What ``swh scheduler --db-url DB_URL WORDS...`` prints (it must succeed)."""
    result = CliRunner().invoke(swh, ["scheduler", "--db-url", db_url, *words])
    assert result.exit_code == 0, result.output
    return result.output


def explained(db_url: str, task_id: int, at: datetime) -> dict[str, Any]:
    answer = cli(db_url, "task", "explain", str(task_id), "--at", at.isoformat(), "--json")
    return json.loads(answer)  # type: ignore[no-any-return]


def check_agreement(
    db_url: str, store: SQLAlchemyStore, task_id: int, instants: list[datetime]
) -> datetime:
    """At each instant, explain's ``ready`` is whether the store would hand
    the task to a claim, and ``can_start_by`` is the stored ``next_run``;
    returns that time."""
    [task] = store.get_tasks([task_id])
    for at in instants:
        answer = explained(db_url, task_id, at)
        claimable = task_id in store.ready_task_ids("nap", now=at, limit=10)
        assert answer["ready"] is claimable, (at, answer["blocked_by"], task.next_run)
        assert answer["can_start_by"] == task.next_run.isoformat()
    return task.next_run


def test_no_retries_any_more_sends_the_task_back_to_its_schedule_for_both(
    db_url: str, now: datetime
) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    try:
        task_type, task = failing_task(store, now)
        # a task without failures keeps its row as it is
        [calm] = store.create_tasks(
            [task_from_input({"period": "2h", "args": [2]}, task_type, now=now)], now=now
        )
        edit = now + 100 * M
        report = store.preview_task_type_update("nap", now=edit, num_retries=None)
        [moved] = [m for m in report.moves if m.field == "next_run"]
        assert (moved.count, moved.example) == (1, task.id)
        assert "next_run 2026-03-01T14:20:00+00:00 -> 2026-03-01T14:00:00+00:00)" in moved.detail
        dry = cli(db_url, "task-type", "update", "nap", "--num-retries", "none", "--dry-run")
        assert f"moves 1 (e.g. task {task.id}): next_run: " in dry
        assert store.get_tasks([task.id or 0]) == [task]  # a dry run writes nothing
        store.update_task_type("nap", now=edit, num_retries=None)
        [after] = store.get_tasks([task.id or 0])
        # retries used up under the new policy: its next regular run, the
        # failed start + 2 h, which the runner now acts on too
        assert after.next_run == now + 2 * H
        assert (after.retries_left, after.updated_at) == (0, edit)
        assert store.get_tasks([calm.id or 0]) == [calm]
        instants = [edit, now + 2 * H - S, now + 2 * H, now + 130 * M, now + 140 * M]
        assert check_agreement(db_url, store, task.id or 0, instants) == now + 2 * H
        # the first instant explain says ready is when a claim takes it
        early = store.claim_ready_tasks("nap", now=now + 2 * H - S, limit=5)
        assert [c.task_id for c in early] == [calm.id]  # due since its creation
        [claimed] = store.claim_ready_tasks("nap", now=now + 2 * H, limit=5)
        assert claimed.task_id == task.id
    finally:
        store.close()


def test_a_shorter_retry_delay_moves_the_awaited_retry_for_both(db_url: str, now: datetime) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    try:
        _, task = failing_task(store, now)
        edit = now + 95 * M
        store.update_task_type("nap", now=edit, retry_delay=20 * M)
        retry = now + 110 * M  # the failed run's end + the new 20 minutes
        instants = [edit, retry - S, retry, now + 140 * M - S, now + 140 * M]
        assert check_agreement(db_url, store, task.id or 0, instants) == retry
        # and back to a longer one: the retry waits the longer delay again
        store.update_task_type("nap", now=edit, retry_delay=50 * M)
        later = now + 140 * M
        instants = [retry, later - S, later]
        assert check_agreement(db_url, store, task.id or 0, instants) == later
        assert store.claim_ready_tasks("nap", now=later - S, limit=5) == []
        [claimed] = store.claim_ready_tasks("nap", now=later, limit=5)
        assert claimed.task_id == task.id
    finally:
        store.close()
