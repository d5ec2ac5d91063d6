"""Fencing tokens and stale ends, on SQLite and PostgreSQL: every start the
guard grants a task carries a larger token; the end of a copy that was taken
away arrives after another copy started: it is kept on its run as
``superseded`` and never decides the task's schedule."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.lease import Renewal
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
        TaskType(type="plain", backend_name="tests.fence.plain", default_interval=S * 3600)
    )


@pytest.fixture
def apply(store: SQLAlchemyStore) -> ApplyOutcome:
    return outcome_applier(TaskTypeCache(store), random.Random(1))


def dispatched(store: SQLAlchemyStore, **fields: object) -> tuple[Task, TaskRun]:
    now = datetime.now(UTC) - timedelta(minutes=1)
    fields.setdefault("schedule_kind", ScheduleKind.ONESHOT)
    [task] = store.create_tasks(
        [Task(type="plain", next_run=now, deadline=now + S, **fields)],  # type: ignore[arg-type]
        now=now,
    )
    assert task.id is not None
    return task, store.schedule_task_run(task.id, now=now)


def task_of(store: SQLAlchemyStore, task_id: int | None) -> Task:
    [task] = store.get_tasks([task_id or 0])
    return task


def run_of(store: SQLAlchemyStore, backend_id: str) -> TaskRun:
    run = store.get_task_run(backend_id)
    assert run is not None
    return run


def taken_away(store: SQLAlchemyStore, task: Task, apply: ApplyOutcome) -> None:
    """The copy of ``task``'s run went silent: the steal step takes it."""
    time.sleep(0.01)  # the database's clock passes the tiny ping timeout
    store.steal_expired_leases(ping_timeout=TINY, grace=TINY, apply=apply)
    time.sleep(0.01)
    report = store.steal_expired_leases(ping_timeout=TINY, grace=TINY, apply=apply)
    assert [r.task_id for r in report.stolen] == [task.id]


def test_every_granted_start_carries_a_larger_token(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run = dispatched(
        store, schedule_kind=ScheduleKind.ADAPTIVE, current_interval=S * 3600, key="a"
    )
    tokens = []
    for copy in range(3):
        grant = store.guard_start(run.backend_id, node="n1", name="w1", tag=f"t{copy}")
        assert grant.granted and grant.task_id == task.id
        tokens.append(grant.fence)
        stored = run_of(store, run.backend_id)
        assert stored.fence == grant.fence
        assert stored.history[-1]["event"] == "assigned"
        assert stored.history[-1]["fence"] == grant.fence
        # a refused copy gets no token and moves nothing
        refused = store.guard_start(run.backend_id, node="n2", name="w2", tag="other")
        assert not refused.granted and refused.fence is None
        store.end_task_runs(
            [RunEnd(run.backend_id, RunStatus.EVENTFUL, datetime.now(UTC))], apply=apply
        )
        run = store.schedule_task_run(task.id or 0, now=task_of(store, task.id).next_run)
    assert tokens == [1, 2, 3]
    # a lease is a start like another: the next token
    lease = store.acquire_lease(run.backend_id, node="n1", name="w1", tag="lease")
    assert lease.granted and lease.fence == 4
    # asking again with the owning tag is granted again, with the same token
    again = store.acquire_lease(run.backend_id, node="n1", name="w1", tag="lease")
    assert again.granted and again.fence == 4


def test_a_stale_copys_end_after_another_start_is_superseded(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, first = dispatched(store)
    old = store.guard_start(first.backend_id, node="n1", name="w1", tag="old")
    taken_away(store, task, apply)
    assert run_of(store, first.backend_id).status is RunStatus.LOST
    assert store.renew_runs([(first.backend_id, "old")]) == {first.backend_id: Renewal.TAKEN}
    # dispatched again, and the new copy starts while the old body still runs
    second = store.schedule_task_run(task.id or 0, now=task_of(store, task.id).next_run)
    new = store.guard_start(second.backend_id, node="n2", name="w2", tag="new")
    assert new.granted and new.fence is not None and old.fence is not None
    assert new.fence > old.fence
    # the old body ends, and says so: its end is stale
    late = datetime.now(UTC)
    [stale] = store.end_task_runs(
        [RunEnd(first.backend_id, RunStatus.EVENTFUL, late, {"status": "eventful"})], apply=apply
    )
    assert stale is not None and stale.status is RunStatus.SUPERSEDED
    assert stale.result == {"status": "eventful"} and stale.ended == late
    entry = stale.history[-1]
    assert entry["event"] == "stale_end" and entry["by"] == second.backend_id
    assert entry["fence"] == old.fence and entry["by_fence"] == new.fence
    during = task_of(store, task.id)
    assert during.status is TaskStatus.SCHEDULED and during.owner_tag == "new"
    assert during.last_good_end_at is None  # the stale success decided nothing
    # the new copy's own end decides, once
    [ended] = store.end_task_runs(
        [RunEnd(second.backend_id, RunStatus.EVENTFUL, late + S)], apply=apply
    )
    assert ended is not None and ended.status is RunStatus.EVENTFUL
    after = task_of(store, task.id)
    assert after.status is TaskStatus.COMPLETED and after.last_good_end_at == late + S
    # the stale end again (a duplicate event) changes nothing
    [again] = store.end_task_runs([RunEnd(first.backend_id, RunStatus.FAILED, late + 2 * S)])
    assert again is not None and again.status is RunStatus.SUPERSEDED and again.ended == late
    good = [r for r in store.get_task_runs(task.id or 0) if r.status.is_good]
    assert [r.backend_id for r in good] == [second.backend_id]


def test_a_taken_copys_end_before_any_other_start_is_stale_all_the_same(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    """Taking the run moves the task's token at once: the old copy's end,
    though no other copy started yet, comes under a stale token. It is
    kept as ``superseded`` and decides nothing; the copy dispatched since
    runs (before, the end replaced ``lost``, completed the task and
    cancelled that copy: "taken" looked like "still mine")."""
    task, first = dispatched(store)
    old = store.guard_start(first.backend_id, node="n1", name="w1", tag="old")
    assert old.granted and old.fence is not None
    taken_away(store, task, apply)
    assert store.current_fence(task.id or 0) == old.fence + 1  # moved by the take
    queued = store.schedule_task_run(task.id or 0, now=task_of(store, task.id).next_run)
    late = datetime.now(UTC)
    [stale] = store.end_task_runs(
        [RunEnd(first.backend_id, RunStatus.UNEVENTFUL, late, {"status": "uneventful"})],
        apply=apply,
    )
    assert stale is not None and stale.status is RunStatus.SUPERSEDED
    assert stale.result == {"status": "uneventful"}
    entry = stale.history[-1]
    assert [h["event"] for h in stale.history][-2:] == ["stolen", "stale_end"]
    assert entry["fence"] == old.fence and entry["by_fence"] == old.fence + 1
    assert "by" not in entry  # no copy started since: the take moved the token
    during = task_of(store, task.id)
    assert during.status is not TaskStatus.COMPLETED and during.last_good_end_at is None
    # the copy dispatched meanwhile runs, under a larger token still
    assert run_of(store, queued.backend_id).status is RunStatus.SCHEDULED
    new = store.guard_start(queued.backend_id, node="n2", name="w2", tag="new", apply=apply)
    assert new.granted and new.fence == old.fence + 2


@pytest.mark.parametrize("stop", ["RunTaken()", "LeaseStopped('stolen')", "LeaseLost()"])
def test_a_taken_copy_stopped_before_any_other_start_is_no_failure(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome, stop: str
) -> None:
    """The copy learns its run was taken (its process resumed) and is
    stopped before the copy dispatched since has started: its stop is no
    outcome of the task (the soak's seed 5 recorded it ``failed``, counted
    a failure and cancelled the new copy); it came under a stale token:
    ``superseded``."""
    task, first = dispatched(store)
    assert store.guard_start(first.backend_id, node="n1", name="w1", tag="old").granted
    taken_away(store, task, apply)
    queued = store.schedule_task_run(task.id or 0, now=task_of(store, task.id).next_run)
    [kept] = store.end_task_runs(
        [RunEnd(first.backend_id, RunStatus.FAILED, datetime.now(UTC), None, stop)], apply=apply
    )
    assert kept is not None and kept.status is RunStatus.SUPERSEDED
    assert [h["event"] for h in kept.history][-2:] == ["stolen", "stale_end"]
    assert task_of(store, task.id).failure_count == 0
    # the copy dispatched meanwhile runs
    assert run_of(store, queued.backend_id).status is RunStatus.SCHEDULED
    assert store.guard_start(queued.backend_id, node="n2", name="w2", tag="new").granted


def test_a_taken_copys_own_final_write_writes_nothing(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, first = dispatched(store)
    assert store.guard_start(first.backend_id, node="n1", name="w1", tag="old").granted
    taken_away(store, task, apply)
    second = store.schedule_task_run(task.id or 0, now=task_of(store, task.id).next_run)
    assert store.guard_start(second.backend_id, node="n2", name="w2", tag="new").granted
    kept = store.finish_lease(first.backend_id, tag="old", status=RunStatus.EVENTFUL, apply=apply)
    assert kept is not None and kept.status is RunStatus.LOST
    assert task_of(store, task.id).owner_tag == "new"


def test_renewals_answer_per_run(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    _, running = dispatched(store, key="running")
    _, done = dispatched(store, key="done")
    assert store.guard_start(running.backend_id, node="n1", name="w1", tag="a").granted
    assert store.guard_start(done.backend_id, node="n1", name="w1", tag="b").granted
    store.end_task_runs(
        [RunEnd(done.backend_id, RunStatus.EVENTFUL, datetime.now(UTC))], apply=apply
    )
    answers = store.renew_runs(
        [(running.backend_id, "a"), (done.backend_id, "b"), ("not-a-run", "c")]
    )
    assert answers == {
        running.backend_id: Renewal.OK,
        done.backend_id: Renewal.FINISHED,
        "not-a-run": Renewal.TAKEN,
    }
    assert store.renew_runs([(running.backend_id, "someone else")]) == {
        running.backend_id: Renewal.TAKEN
    }
    assert store.renew_runs([]) == {}
