"""Why a ready task waits, in words: ``task explain`` (text and JSON) on
SQLite and PostgreSQL, from real claims: the tasks before it in the runner's
own order, the runs in its queue against the limit, the pace of the last
hour, and a paused type."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import Priority, ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def _explain(db_url: str, task_id: int, *extra: str) -> str:
    result = CliRunner().invoke(
        swh,
        [
            "scheduler",
            "--db-url",
            db_url,
            "task",
            "explain",
            str(task_id),
            "--at",
            NOW.isoformat(),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_a_ready_task_says_where_it_stands_in_line(db_url: str) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    store.create_task_type(TaskType(type="fetch", backend_name="fetch", max_queue_length=3))
    tasks = [
        Task(
            type="fetch",
            args=(n,),
            schedule_kind=ScheduleKind.ONESHOT,
            # the earlier the deadline, the earlier in line
            next_run=NOW - 60 * MIN,
            deadline=NOW - (60 - n) * MIN,
            priority=Priority.NORMAL,
        )
        for n in range(10)
    ]
    created = store.create_tasks(tasks, now=NOW - 2 * 60 * MIN)
    # three dispatched 20 minutes ago, still in the broker: the queue is full
    claimed = store.claim_ready_tasks("fetch", now=NOW - 20 * MIN, limit=3)
    assert len(claimed) == 3
    seventh = created[6].id or 0
    store.close()

    answer = json.loads(_explain(db_url, seventh, "--json"))
    waits = answer["waits"]
    assert waits["ahead"] == 3  # tasks 3, 4 and 5 come first (0-2 were dispatched)
    assert waits["queued"] == 3 and waits["max_queue_length"] == 3 and waits["queue_full"]
    assert waits["dispatched_last_hour"] == 3
    # three an hour, seven before it (three queued, three ready, itself): 2h20m
    assert waits["expected_start"] == (NOW + 140 * MIN).isoformat()
    text = _explain(db_url, seventh)
    assert (
        "In line: 3 ready task(s) of its type come before it in dispatch order; 3 run(s) of "
        "its type wait in the broker, at its limit of 3" in text
    )
    assert "should start in about 2h20m" in text

    # not due: not in line
    assert json.loads(_explain(db_url, created[0].id or 0, "--json"))["waits"] is None


def test_a_type_never_dispatched_and_a_paused_one_say_so(db_url: str) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    store.create_task_type(TaskType(type="fetch", backend_name="fetch"))
    (task,) = store.create_tasks(
        [
            Task(
                type="fetch",
                args=(1,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=NOW - MIN,
                deadline=NOW + MIN,
            )
        ],
        now=NOW - 2 * MIN,
    )
    store.close()
    text = _explain(db_url, task.id or 0)
    assert "In line: 0 ready task(s) of its type come before it" in text
    assert "none was dispatched within the last 1h (no runner" in text
    store = SQLAlchemyStore.from_url(db_url)
    store.pause_task_type("fetch", now=NOW - MIN)
    store.close()
    assert "In line: its type is paused" in _explain(db_url, task.id or 0)
