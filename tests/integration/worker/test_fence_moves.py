"""The fence moves when a run is taken (DESIGN.md §5 invariant 7), on
SQLite and PostgreSQL: every path that takes a run from its copy (the
steal step, a warm shutdown's yield, the end of a worker's runs, a copy
that fenced itself) moves its task's fencing token in the same
transaction, so the copy's token is stale from that moment; and the end of
a copy that fenced itself is no outcome of the task."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.model import (
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.interface import ApplyOutcome, RunEnd

S = timedelta(seconds=1)
TINY = timedelta(milliseconds=1)


@pytest.fixture
def plain_type(store: SQLAlchemyStore) -> TaskType:
    return store.create_task_type(
        TaskType(type="plain", backend_name="tests.moves.plain", default_interval=S * 3600)
    )


@pytest.fixture
def apply(store: SQLAlchemyStore) -> ApplyOutcome:
    return outcome_applier(TaskTypeCache(store), random.Random(1))


def dispatched(store: SQLAlchemyStore) -> tuple[Task, TaskRun]:
    now = datetime.now(UTC) - timedelta(minutes=1)
    [task] = store.create_tasks(
        [Task(type="plain", next_run=now, deadline=now + S, schedule_kind=ScheduleKind.ONESHOT)],
        now=now,
    )
    assert task.id is not None
    return task, store.schedule_task_run(task.id, now=now)


def started(store: SQLAlchemyStore, tag: str = "old") -> tuple[Task, TaskRun, int]:
    task, run = dispatched(store)
    grant = store.guard_start(run.backend_id, node="n1", name="w1", tag=tag)
    assert grant.granted and grant.fence is not None
    return task, run, grant.fence


def task_of(store: SQLAlchemyStore, task: Task) -> Task:
    [found] = store.get_tasks([task.id or 0])
    return found


def run_of(store: SQLAlchemyStore, run: TaskRun) -> TaskRun:
    found = store.get_task_run(run.backend_id)
    assert found is not None
    return found


def test_the_steal_moves_the_token_when_it_takes_the_run_not_at_the_notice(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run, token = started(store)
    time.sleep(0.01)
    notice = store.steal_expired_leases(ping_timeout=TINY, grace=S * 3600, apply=apply)
    assert notice.warned == (task.id,) and notice.stolen == ()
    assert store.current_fence(task.id or 0) == token  # on notice, still the copy's
    time.sleep(0.01)
    taken = store.steal_expired_leases(ping_timeout=TINY, grace=TINY, apply=apply)
    assert [r.backend_id for r in taken.stolen] == [run.backend_id]
    assert store.current_fence(task.id or 0) == token + 1  # stale at once


def test_a_yield_moves_the_token(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run, token = started(store)
    yielded = store.yield_lease(run.backend_id, tag="old", apply=apply)
    assert yielded is not None and yielded.status is RunStatus.LOST
    assert store.current_fence(task.id or 0) == token + 1


def test_ending_a_gone_workers_runs_moves_the_token(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run = dispatched(store)
    at = datetime.now(UTC)
    # a run no guard took (its start known from task-started only)
    store.start_task_run(run.backend_id, started=at - S, worker="w1@n1")
    before = store.current_fence(task.id or 0)
    [lost] = store.end_worker_runs("w1@n1", at=at, apply=apply)
    assert lost.status is RunStatus.LOST
    assert store.current_fence(task.id or 0) == (before or 0) + 1


def test_a_copy_that_fenced_itself_gives_its_open_run_up_as_lost(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    """Cut off from the database, the copy stopped its body (``LeaseLost``)
    before the monitor took the run; Celery's ``task-failed`` reached the
    listener: the run is not ``failed`` (no retry counted, no failure) but
    ``lost``, given up: the task runnable at once, the token moved."""
    task, run, token = started(store)
    end = RunEnd(run.backend_id, RunStatus.FAILED, datetime.now(UTC), None, "LeaseLost()")
    [given_up] = store.end_task_runs([end], apply=apply)
    assert given_up is not None and given_up.status is RunStatus.LOST
    assert given_up.history[-1]["event"] == "lease_lost"
    assert "LeaseLost" in (given_up.error or "")
    after = task_of(store, task)
    assert after.owner_tag is None and after.failure_count == 0
    assert after.status is TaskStatus.WAITING and after.next_run <= datetime.now(UTC)
    assert store.current_fence(task.id or 0) == token + 1
    # the same end again is a duplicate: nothing moves
    [again] = store.end_task_runs([end], apply=apply)
    assert again is not None and again.status is RunStatus.LOST
    assert again.history[-1]["event"] == "lease_lost"
    assert store.current_fence(task.id or 0) == token + 1
    assert task_of(store, task).failure_count == 0
    # the next copy runs, under a larger token
    second = store.schedule_task_run(task.id or 0, now=after.next_run)
    grant = store.guard_start(second.backend_id, node="n2", name="w2", tag="new")
    assert grant.granted and grant.fence == token + 2


def test_a_success_reported_after_the_copy_gave_its_run_up_is_stale(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run, token = started(store)
    lost = RunEnd(run.backend_id, RunStatus.FAILED, datetime.now(UTC), None, "LeaseLost()")
    store.end_task_runs([lost], apply=apply)
    late = RunEnd(run.backend_id, RunStatus.EVENTFUL, datetime.now(UTC), {"status": "eventful"})
    [stale] = store.end_task_runs([late], apply=apply)
    assert stale is not None and stale.status is RunStatus.SUPERSEDED
    assert stale.history[-1]["event"] == "stale_end"
    assert stale.history[-1]["by_fence"] == token + 1
    assert task_of(store, task).status is not TaskStatus.COMPLETED


@pytest.mark.parametrize("error", ["ValueError('x')", "ValueError('LeaseLost(me)')"])
def test_a_failure_of_an_open_run_that_names_no_fence_is_a_failure(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome, error: str
) -> None:
    task, run, token = started(store)
    end = RunEnd(run.backend_id, RunStatus.FAILED, datetime.now(UTC), None, error)
    [failed] = store.end_task_runs([end], apply=apply)
    assert failed is not None and failed.status is RunStatus.FAILED
    assert task_of(store, task).failure_count == 1
    assert store.current_fence(task.id or 0) == token  # an end is no take
