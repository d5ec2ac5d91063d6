"""The event handler on PostgreSQL: mapping, duplicates, disorder, unknown runs."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from listenertest import H, new_sleep_type

from swh_like_scheduler import policy
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.listener import (
    Action,
    EventHandler,
    handle_event,
    parse_event,
    parse_result_repr,
)
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = pytest.mark.postgresql

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def ev(kind: str, backend_id: str, at: datetime, **fields: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "uuid": backend_id,
        "timestamp": at.timestamp(),
        "hostname": "w1@node",
        **fields,
    }


def scheduled_run(
    store: SQLAlchemyStore,
    task_type: TaskType,
    *,
    oneshot: bool = False,
    visited: datetime | None = None,
) -> tuple[int, str]:
    """A task with a dispatched run (its previous good run started at
    ``visited``); returns the task id and the run's id."""
    task = Task(
        type=task_type.type,
        kwargs={"n": random.random()},
        schedule_kind=ScheduleKind.ONESHOT if oneshot else ScheduleKind.ADAPTIVE,
        current_interval=None if oneshot else H,
        last_good_start_at=visited,
        next_run=T0 - H,
        deadline=T0,
    )
    [created] = store.create_tasks([task], now=T0 - H)
    assert created.id is not None
    run = store.schedule_task_run(created.id, now=T0)
    return created.id, run.backend_id


@pytest.fixture
def task_type(pg_store: SQLAlchemyStore) -> TaskType:
    return new_sleep_type(pg_store)


@pytest.fixture
def handler(pg_store: SQLAlchemyStore) -> EventHandler:
    return EventHandler(pg_store, rng=random.Random(0))


def test_success_before_start_records_both_and_duplicates_change_nothing(
    pg_store: SQLAlchemyStore, task_type: TaskType, handler: EventHandler
) -> None:
    task_id, backend_id = scheduled_run(pg_store, task_type, visited=T0 - 2 * H)
    ended = T0 + timedelta(seconds=10)
    success = ev("task-succeeded", backend_id, ended, result="{'status': 'uneventful'}", runtime=4)
    assert handler.handle(success).action is Action.ENDED
    late_start = ev("task-started", backend_id, T0 + timedelta(seconds=6))
    assert handler.handle(late_start).action is Action.DUPLICATE
    assert handler.handle(success).action is Action.DUPLICATE
    failure = ev("task-failed", backend_id, ended, exception="Boom()")
    assert handler.handle(failure).action is Action.DUPLICATE

    run = pg_store.get_task_run(backend_id)
    assert run is not None
    assert run.status is RunStatus.UNEVENTFUL
    assert run.started == T0 + timedelta(seconds=6)  # ended - runtime
    assert run.ended == ended and run.worker == "w1@node"
    assert run.result == {"status": "uneventful"}
    [task] = pg_store.get_tasks([task_id])
    assert task.status is TaskStatus.WAITING
    assert task.last_good_start_at == run.started and task.last_good_end_at == ended
    assert task.average_good_duration == timedelta(seconds=4)
    assert task.current_interval == 2 * H and task.next_run == ended + 2 * H
    assert pg_store.get_task_runs(task_id) == [run]


def test_end_before_start_in_one_batch_keeps_the_start_event_time(
    pg_store: SQLAlchemyStore, task_type: TaskType, handler: EventHandler
) -> None:
    task_id, backend_id = scheduled_run(pg_store, task_type)
    started, ended = T0 + timedelta(seconds=1), T0 + timedelta(seconds=3)
    batch = [
        ev("task-succeeded", backend_id, ended, result="True", runtime=1.5),
        ev("task-started", backend_id, started),
        ev("task-succeeded", backend_id, ended, result="True", runtime=1.5),
    ]
    summary = handler.handle_batch(batch)
    assert (summary[Action.STARTED], summary[Action.ENDED], summary[Action.DUPLICATE]) == (1, 1, 1)
    run = pg_store.get_task_run(backend_id)
    assert run is not None and run.status is RunStatus.EVENTFUL
    assert (run.started, run.ended) == (started, ended)
    [task] = pg_store.get_tasks([task_id])
    assert task.average_good_duration == timedelta(seconds=2)


def test_failure_retry_revocation_and_unknown_runs(
    pg_store: SQLAlchemyStore, task_type: TaskType, handler: EventHandler
) -> None:
    failing_id, failing = scheduled_run(pg_store, task_type)
    assert handler.handle(ev("task-started", failing, T0)).action is Action.STARTED
    retried = ev("task-retried", failing, T0 + timedelta(seconds=1), exception="Retry()")
    assert handler.handle(retried).action is Action.KEPT_OPEN
    run = pg_store.get_task_run(failing)
    assert run is not None and run.status is RunStatus.STARTED
    failed = ev("task-failed", failing, T0 + timedelta(seconds=2), exception="OSError('down')")
    assert handler.handle(failed).action is Action.ENDED
    run = pg_store.get_task_run(failing)
    assert run is not None and run.status is RunStatus.FAILED and run.error == "OSError('down')"
    [task] = pg_store.get_tasks([failing_id])
    assert task.failure_count == 1 and task.status is TaskStatus.WAITING
    assert task.next_run == T0 + timedelta(seconds=2, minutes=5)
    assert task.last_good_start_at is None

    revoked_id, revoked = scheduled_run(pg_store, task_type)
    result = handler.handle(ev("task-revoked", revoked, T0, terminated=False))
    assert result.action is Action.ENDED and result.status is RunStatus.CANCELLED
    [task] = pg_store.get_tasks([revoked_id])
    assert task.status is TaskStatus.WAITING and task.failure_count == 0

    _, expired = scheduled_run(pg_store, task_type)
    result = handler.handle(ev("task-revoked", expired, T0, expired=True))
    assert result.status is RunStatus.LOST

    stranger = "00000000-0000-0000-0000-000000000000"
    for kind in ("task-started", "task-succeeded", "task-failed"):
        result = handler.handle(ev(kind, stranger, T0, result="1", runtime=1))
        assert result.action is Action.UNKNOWN_RUN
    heartbeat = {"type": "worker-heartbeat", "hostname": "w1@node", "timestamp": 1.0}
    assert handle_event(heartbeat, pg_store, rng=random.Random()).action is Action.IGNORED


def test_oneshot_completes_and_a_disabled_task_stays_disabled(
    pg_store: SQLAlchemyStore, task_type: TaskType, handler: EventHandler
) -> None:
    oneshot_id, oneshot = scheduled_run(pg_store, task_type, oneshot=True)
    handler.handle(ev("task-succeeded", oneshot, T0, result="{'status': 'eventful'}", runtime=0))
    [task] = pg_store.get_tasks([oneshot_id])
    assert task.status is TaskStatus.COMPLETED

    disabled_id, disabled = scheduled_run(pg_store, task_type)
    pg_store.disable_tasks([disabled_id], now=T0)
    handler.handle(ev("task-succeeded", disabled, T0, result="None", runtime=0))
    [task] = pg_store.get_tasks([disabled_id])
    assert task.status is TaskStatus.DISABLED
    run = pg_store.get_task_run(disabled)
    assert run is not None and run.status is RunStatus.UNEVENTFUL


def _hourly_runs(
    store: SQLAlchemyStore, handler: EventHandler, task: Task, cycles: int
) -> list[tuple[datetime, Task]]:
    """``cycles`` runs of 6 minutes of ``task``, each claimed as soon as it
    may run (an idle platform), started and ended through worker events;
    each start with the task as it was then (its should_start_by)."""
    took = timedelta(minutes=6)
    seen: list[tuple[datetime, Task]] = []
    for _ in range(cycles):
        at = task.next_run
        [claimed] = store.claim_ready_tasks(task.type, now=at, limit=1)
        assert claimed.task_id == task.id
        seen.append((at, task))
        assert handler.handle(ev("task-started", claimed.backend_id, at)).action is Action.STARTED
        done = ev("task-succeeded", claimed.backend_id, at + took, result="True", runtime=360)
        assert handler.handle(done).action is Action.ENDED
        [task] = store.get_tasks([task.id or 0])
    seen.append((task.next_run, task))
    return seen


def test_the_hourly_report_keeps_its_period_with_the_default_cooldown(
    pg_store: SQLAlchemyStore, handler: EventHandler
) -> None:
    """Issue 46: an hourly report created without a cooldown, whose runs take
    6 minutes. Its default cooldown follows the run time (42 min, not 54):
    started as soon as it may, each run starts before its should_start_by
    and the report is never stale. A cooldown given (54 min) stays, and its
    condition says each run starts 6 minutes late."""
    minutes = timedelta(minutes=1)
    report_type, given_type = new_sleep_type(pg_store), new_sleep_type(pg_store)
    report, given = (
        pg_store.create_tasks(
            [
                Task(
                    type=kind.type,
                    schedule_kind=ScheduleKind.PERIODIC,
                    period=H,
                    cooldown=cooldown,
                    next_run=T0,
                    deadline=T0 + H,
                )
            ],
            now=T0 - H,
        )[0]
        for kind, cooldown in ((report_type, None), (given_type, 54 * minutes))
    )
    assert report.cooldown == 54 * minutes and report.cooldown_is_default
    assert not given.cooldown_is_default

    cycles = _hourly_runs(pg_store, handler, report, 6)
    for (start, before), (_, after) in pairwise(cycles):
        assert after.average_good_duration == 6 * minutes
        assert after.cooldown == 42 * minutes and after.cooldown_is_default
        assert after.next_run == start + 48 * minutes  # its end + 42 min
        assert after.deadline == start + 54 * minutes  # its start + 1 h - 6 min
        assert start <= before.deadline  # the deadline is kept
        report_now = policy.condition(after, report_type, after.next_run)
        assert report_now.level is policy.Condition.OK, report_now
    [(first, _), (second, ran), *_] = _hourly_runs(pg_store, handler, given, 2)
    assert ran.cooldown == 54 * minutes and not ran.cooldown_is_default
    assert second == first + H and ran.deadline == first + 54 * minutes  # 6 min late
    warned = policy.condition(ran, given_type, first + 7 * minutes)
    assert warned.reason is policy.Reason.COOLDOWN_TOO_LONG
    assert "each run will start 6m late" in warned.detail


def test_result_reprs() -> None:
    assert parse_result_repr("{'status': 'eventful', 'n': 1}") == {"status": "eventful", "n": 1}
    assert parse_result_repr("None") is None
    truncated = "{'status': 'uneventful', 'blob': 'xxxxxxxx...'"
    assert parse_result_repr(truncated) == {"status": "uneventful"}
    assert parse_result_repr("<object at 0x1>") == "<object at 0x1>"
    odd = parse_event(ev("task-succeeded", "x", T0, result="{'status': 'weird'}"))
    assert odd is not None and odd.status is RunStatus.FAILED and odd.error
    assert parse_event({"type": "task-started", "uuid": "x"}) is None  # no timestamp
