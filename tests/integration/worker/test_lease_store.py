"""The store's half of the lease and steal protocols, on SQLite and PostgreSQL."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.lease import PingAnswer, Refusal
from swh_like_scheduler.domain.model import (
    BlackoutPeriod,
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.monitor import monitor_tick
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.interface import ApplyOutcome

S = timedelta(seconds=1)


@pytest.fixture
def lease_type(store: SQLAlchemyStore) -> TaskType:
    return store.create_task_type(
        TaskType(
            type="leased",
            backend_name="tests.lease.leased",
            default_interval=timedelta(hours=1),
            uses_lease=True,
        )
    )


@pytest.fixture
def apply(store: SQLAlchemyStore) -> ApplyOutcome:
    return outcome_applier(TaskTypeCache(store), random.Random(1))


def dispatched(store: SQLAlchemyStore, **fields: object) -> tuple[Task, TaskRun]:
    """A task of type ``leased`` with an open (scheduled) run, as the runner leaves it."""
    now = datetime.now(UTC) - timedelta(minutes=1)
    fields.setdefault("schedule_kind", ScheduleKind.ADAPTIVE)
    if fields["schedule_kind"] is ScheduleKind.ADAPTIVE:
        fields.setdefault("current_interval", timedelta(hours=1))
    [task] = store.create_tasks(
        [Task(type="leased", next_run=now, deadline=now + S, **fields)],  # type: ignore[arg-type]
        now=now,
    )
    assert task.id is not None
    run = store.schedule_task_run(task.id, now=now)
    return task, run


def owner(store: SQLAlchemyStore, task_id: int) -> Task:
    [task] = store.get_tasks([task_id])
    return task


def events(run: TaskRun | None) -> list[str]:
    assert run is not None
    return [h["event"] for h in run.history]


@pytest.fixture
def leased(store: SQLAlchemyStore, lease_type: TaskType) -> Iterator[tuple[Task, TaskRun]]:
    yield dispatched(store)


def test_acquire_claims_run_and_ownership(
    store: SQLAlchemyStore, leased: tuple[Task, TaskRun]
) -> None:
    task, run = leased
    grant = store.acquire_lease(run.backend_id, node="n1", name="w1", tag="t1")
    assert grant.granted and grant.reason is Refusal.OK
    assert grant.run is not None and grant.run.status is RunStatus.STARTED
    stored = store.get_task_run(run.backend_id)
    assert stored is not None and stored.worker == "w1@n1" and stored.started == grant.db_now
    assert events(stored) == ["assigned"]
    assert task.id is not None
    now_owner = owner(store, task.id)
    assert (now_owner.owner_node, now_owner.owner_name, now_owner.owner_tag) == ("n1", "w1", "t1")
    assert now_owner.owner_started_at == now_owner.owner_last_ping_at == grant.db_now
    # the DB clock, not ours: close to it all the same
    assert abs(grant.db_now - datetime.now(UTC)) < timedelta(seconds=30)
    # asking again with the same tag is granted and changes nothing
    again = store.acquire_lease(run.backend_id, node="n1", name="w1", tag="t1")
    assert again.granted
    assert events(store.get_task_run(run.backend_id)) == ["assigned"]


def test_second_copy_refused_while_held(
    store: SQLAlchemyStore, leased: tuple[Task, TaskRun]
) -> None:
    _, run = leased
    assert store.acquire_lease(run.backend_id, node="n1", name="w1", tag="t1").granted
    second = store.acquire_lease(run.backend_id, node="n2", name="w2", tag="t2")
    assert not second.granted and second.reason is Refusal.ALREADY_RUNNING
    stored = store.get_task_run(run.backend_id)
    assert stored is not None and stored.worker == "w1@n1"


def test_unknown_and_finished_runs_refused(
    store: SQLAlchemyStore, leased: tuple[Task, TaskRun], apply: ApplyOutcome
) -> None:
    task, run = leased
    assert store.acquire_lease("nope", node="n", name="w", tag="t").reason is Refusal.UNKNOWN_RUN
    assert store.acquire_lease(run.backend_id, node="n1", name="w1", tag="t1").granted
    ended = store.finish_lease(
        run.backend_id,
        tag="t1",
        status=RunStatus.EVENTFUL,
        result={"status": "eventful"},
        apply=apply,
    )
    assert ended is not None and ended.status is RunStatus.EVENTFUL
    assert task.id is not None
    after = owner(store, task.id)
    assert after.owner_tag is None and after.status is TaskStatus.WAITING
    assert after.last_good_end_at == ended.ended
    # a late duplicate of the same message
    late = store.acquire_lease(run.backend_id, node="n2", name="w2", tag="t2")
    assert not late.granted and late.reason is Refusal.FINISHED_RUN
    # finishing twice is harmless
    again = store.finish_lease(run.backend_id, tag="t1", status=RunStatus.FAILED, apply=apply)
    assert again is not None and again.status is RunStatus.EVENTFUL


def test_banned_node_refused(store: SQLAlchemyStore, lease_type: TaskType) -> None:
    _, run = dispatched(store, dont_run_on_nodes=("bad",))
    refused = store.acquire_lease(run.backend_id, node="bad", name="w", tag="t1")
    assert not refused.granted and refused.reason is Refusal.BANNED_NODE
    assert store.acquire_lease(run.backend_id, node="good", name="w", tag="t2").granted


def test_blackout_refused(
    store: SQLAlchemyStore, lease_type: TaskType, apply: ApplyOutcome
) -> None:
    # a window around the current UTC time of day (the DB's clock decides)
    wall = datetime.now(UTC)
    start = (wall - timedelta(minutes=30)).time().replace(microsecond=0)
    end = (wall + timedelta(minutes=30)).time().replace(microsecond=0)
    window = BlackoutPeriod(start, end)
    task, run = dispatched(store, blackout_periods=(window,))
    refused = store.acquire_lease(run.backend_id, node="n", name="w", tag="t1")
    assert not refused.granted and refused.reason is Refusal.BLACKOUT
    stored = store.get_task_run(run.backend_id)
    assert stored is not None and stored.status is RunStatus.SCHEDULED  # no apply: unchanged
    # with apply the pointless run is ended and the task waits for the window's end
    refused = store.acquire_lease(run.backend_id, node="n", name="w", tag="t1", apply=apply)
    assert refused.run is not None and refused.run.status is RunStatus.LOST
    assert task.id is not None
    after = owner(store, task.id)
    assert after.status is TaskStatus.WAITING and after.next_run > refused.db_now


def test_cancelled_task_refused_and_running_one_told_to_stop(
    store: SQLAlchemyStore, lease_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run = dispatched(store)
    assert task.id is not None
    assert store.acquire_lease(run.backend_id, node="n", name="w", tag="t1").granted
    assert store.ping_lease(run.backend_id, tag="t1").proceed
    store.cancel_tasks([task.id], now=datetime.now(UTC))
    reply = store.ping_lease(run.backend_id, tag="t1")
    assert not reply.proceed and reply.reason is PingAnswer.CANCELLED
    ended = store.finish_lease(run.backend_id, tag="t1", status=RunStatus.CANCELLED, apply=apply)
    assert ended is not None and ended.status is RunStatus.CANCELLED
    after = owner(store, task.id)
    assert after.status is TaskStatus.CANCELLED and after.owner_tag is None

    # a cancelled task whose run was started (by the listener) but not leased
    other, other_run = dispatched(store, args=(2,))
    assert other.id is not None
    store.start_task_run(other_run.backend_id, started=datetime.now(UTC), worker="w@n")
    store.cancel_tasks([other.id], now=datetime.now(UTC))
    refused = store.acquire_lease(other_run.backend_id, node="n", name="w", tag="t2", apply=apply)
    assert not refused.granted and refused.reason is Refusal.CANCELLED
    assert refused.run is not None and refused.run.status is RunStatus.CANCELLED


def test_ping_records_progress_and_stale_tag_is_stolen(
    store: SQLAlchemyStore, leased: tuple[Task, TaskRun]
) -> None:
    task, run = leased
    grant = store.acquire_lease(run.backend_id, node="n", name="w", tag="t1")
    reply = store.ping_lease(run.backend_id, tag="t1", progress=0.25)
    assert reply.proceed and reply.reason is PingAnswer.OK and reply.db_now >= grant.db_now
    stored = store.get_task_run(run.backend_id)
    assert stored is not None and stored.progress == 0.25
    assert task.id is not None
    assert owner(store, task.id).owner_last_ping_at == reply.db_now
    stale = store.ping_lease(run.backend_id, tag="someone-else")
    assert not stale.proceed and stale.reason is PingAnswer.STOLEN
    assert store.finish_lease(run.backend_id, tag="someone-else", status=RunStatus.FAILED) == (
        store.get_task_run(run.backend_id)
    )
    assert owner(store, task.id).owner_tag == "t1"


def test_ping_during_grace_clears_the_steal(
    store: SQLAlchemyStore, leased: tuple[Task, TaskRun], apply: ApplyOutcome
) -> None:
    task, run = leased
    assert task.id is not None
    store.acquire_lease(run.backend_id, node="n", name="w", tag="t1")
    time.sleep(1.2)
    report = store.steal_expired_leases(ping_timeout=S, grace=timedelta(seconds=30), apply=apply)
    assert report.warned == (task.id,) and report.stolen == ()
    assert owner(store, task.id).steal_start_at == report.db_now
    reply = store.ping_lease(run.backend_id, tag="t1")
    assert reply.proceed
    after = owner(store, task.id)
    assert after.steal_start_at is None and after.owner_tag == "t1"
    assert events(store.get_task_run(run.backend_id)) == ["assigned", "pinged_late", "pinged_late"]


def test_steal_after_timeout_and_grace(
    store: SQLAlchemyStore, leased: tuple[Task, TaskRun], apply: ApplyOutcome
) -> None:
    task, run = leased
    assert task.id is not None
    store.acquire_lease(run.backend_id, node="n", name="w", tag="t1")
    ping, grace = S, S
    # not yet late
    assert monitor_tick(store, ping_timeout=ping, grace=grace, apply=apply).steal.warned == ()
    time.sleep(1.2)
    first = monitor_tick(store, ping_timeout=ping, grace=grace, apply=apply).steal
    assert first.warned == (task.id,) and first.stolen == ()
    time.sleep(1.2)
    second = monitor_tick(store, ping_timeout=ping, grace=grace, apply=apply).steal
    assert [r.backend_id for r in second.stolen] == [run.backend_id]
    lost = store.get_task_run(run.backend_id)
    assert lost is not None and lost.status is RunStatus.LOST
    assert events(lost) == ["assigned", "pinged_late", "stolen"]
    after = owner(store, task.id)
    assert after.owner_tag is None and after.steal_start_at is None
    assert after.status is TaskStatus.WAITING and after.next_run <= second.db_now
    assert after.failure_count == 0  # lost is neutral
    # the old owner's late ping and final write change nothing
    late = store.ping_lease(run.backend_id, tag="t1")
    assert not late.proceed and late.reason is PingAnswer.STOLEN
    again = store.finish_lease(run.backend_id, tag="t1", status=RunStatus.EVENTFUL, apply=apply)
    assert again is not None and again.status is RunStatus.LOST
    # the task is runnable: the runner claims it again, a new owner takes it
    claimed = store.claim_ready_tasks("leased", now=datetime.now(UTC), limit=10)
    assert [c.task_id for c in claimed] == [task.id]
    assert store.acquire_lease(claimed[0].backend_id, node="n2", name="w2", tag="t2").granted
    assert not store.ping_lease(run.backend_id, tag="t1").proceed


def test_yield_makes_the_task_runnable_at_once(
    store: SQLAlchemyStore, lease_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run = dispatched(store)
    assert task.id is not None
    store.acquire_lease(run.backend_id, node="n", name="w", tag="t1")
    store.ping_lease(run.backend_id, tag="t1", progress=0.5)
    assert store.yield_lease(run.backend_id, tag="other", apply=apply) is not None
    assert owner(store, task.id).owner_tag == "t1"  # not the owner: nothing written
    ended = store.yield_lease(run.backend_id, tag="t1", apply=apply)
    assert ended is not None and ended.status is RunStatus.LOST
    assert ended.history[-1]["event"] == "yielded" and ended.history[-1]["progress"] == 0.5
    after = owner(store, task.id)
    assert after.status is TaskStatus.WAITING and after.owner_tag is None
    assert ended.ended is not None and after.next_run <= ended.ended
    assert not store.ping_lease(run.backend_id, tag="t1").proceed


def test_start_monitor_once(store: SQLAlchemyStore, db_url: str, lease_type: TaskType) -> None:
    from click.testing import CliRunner

    import swh_like_scheduler.cli.monitor  # noqa: F401  (registers the command)
    from swh_like_scheduler.cli import swh

    _, run = dispatched(store)
    store.acquire_lease(run.backend_id, node="n", name="w", tag="t1")
    time.sleep(0.3)
    args = ["scheduler", "--db-url", db_url, "start-monitor", "--once", "--ping-timeout", "0.1"]
    first = CliRunner().invoke(swh, [*args, "--grace", "0.1", "--json"])
    assert first.exit_code == 0, first.output
    assert '"warned": [\n    1\n  ]' in first.output
    time.sleep(0.3)
    second = CliRunner().invoke(swh, [*args, "--grace", "0.1"])
    assert second.exit_code == 0, second.output
    assert "0 lease(s) put on notice, 1 run(s) lost" in second.output
    assert run_status(store, run.backend_id) is RunStatus.LOST


def run_status(store: SQLAlchemyStore, backend_id: str) -> RunStatus:
    run = store.get_task_run(backend_id)
    assert run is not None
    return run.status
