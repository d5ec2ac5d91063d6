"""The store's half of the start guard of every task type, on SQLite and
PostgreSQL: one copy of a run at a time, refused copies noted, ownership
released by whatever ends the run, taken only from a copy that stopped
renewing it."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.lease import Refusal, Renewal
from swh_like_scheduler.domain.model import (
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.domain.records import WorkerChange, WorkerChangeKind, WorkerSighting
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.interface import ApplyOutcome, RunEnd

S = timedelta(seconds=1)


@pytest.fixture
def plain_type(store: SQLAlchemyStore) -> TaskType:
    return store.create_task_type(
        TaskType(
            type="plain", backend_name="tests.guard.plain", default_interval=timedelta(hours=1)
        )
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


def events(store: SQLAlchemyStore, backend_id: str) -> list[str]:
    run = store.get_task_run(backend_id)
    assert run is not None
    return [h["event"] for h in run.history]


def test_first_copy_starts_the_run_second_is_refused_and_noted(
    store: SQLAlchemyStore, plain_type: TaskType
) -> None:
    task, run = dispatched(store)
    grant = store.guard_start(run.backend_id, node="n1", name="w1", tag="a")
    assert grant.granted
    stored = store.get_task_run(run.backend_id)
    assert stored is not None and stored.status is RunStatus.STARTED
    assert stored.worker == "w1@n1" and stored.started == grant.db_now
    owned = task_of(store, task.id)
    # running, so its condition watches the run; but it never pings
    assert owned.owner_tag == "a" and owned.owner_started_at == grant.db_now
    assert owned.owner_last_ping_at is None and owned.is_running
    second = store.guard_start(run.backend_id, node="n2", name="w2", tag="b")
    assert not second.granted and second.reason is Refusal.ALREADY_RUNNING
    assert events(store, run.backend_id) == ["assigned", "refused_copy"]
    assert task_of(store, task.id).owner_tag == "a"


def test_a_copy_after_the_end_is_refused(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run = dispatched(store)
    assert store.guard_start(run.backend_id, node="n1", name="w1", tag="a").granted
    [ended] = store.end_task_runs(
        [RunEnd(run.backend_id, RunStatus.UNEVENTFUL, datetime.now(UTC))], apply=apply
    )
    assert ended is not None and ended.progress == 1.0  # a good end is all the work
    after = task_of(store, task.id)
    assert after.owner_tag is None and after.status is TaskStatus.COMPLETED
    late = store.guard_start(run.backend_id, node="n1", name="w1", tag="c")
    assert not late.granted and late.reason is Refusal.FINISHED_RUN


def test_cancelled_task_refuses_its_queued_copy(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run = dispatched(store)
    store.cancel_tasks([task.id or 0], now=datetime.now(UTC))
    grant = store.guard_start(run.backend_id, node="n1", name="w1", tag="a", apply=apply)
    assert not grant.granted
    stored = store.get_task_run(run.backend_id)
    assert stored is not None and stored.status is RunStatus.CANCELLED


def test_unknown_run_refused(store: SQLAlchemyStore, plain_type: TaskType) -> None:
    grant = store.guard_start("no-such-run", node="n1", name="w1", tag="a")
    assert not grant.granted and grant.reason is Refusal.UNKNOWN_RUN


def test_a_copy_that_renews_keeps_its_run_a_silent_one_loses_it(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    _, kept = dispatched(store, key="kept")
    silent_task, silent = dispatched(store, key="silent")
    assert store.guard_start(kept.backend_id, node="n1", name="w1", tag="a").granted
    assert store.guard_start(silent.backend_id, node="n1", name="w1", tag="b").granted
    time.sleep(0.6)  # the database's clock passes the ping timeout of both starts
    answers = store.renew_runs([(kept.backend_id, "a")])
    assert answers == {kept.backend_id: Renewal.OK}
    report = store.steal_expired_leases(ping_timeout=S / 2, grace=S / 1000)
    assert report.warned == (silent_task.id,)  # silent since its start
    time.sleep(0.01)
    report = store.steal_expired_leases(ping_timeout=S / 2, grace=S / 1000, apply=apply)
    assert [r.backend_id for r in report.stolen] == [silent.backend_id]
    assert events(store, silent.backend_id) == ["assigned", "pinged_late", "stolen"]
    assert task_of(store, silent_task.id).status is TaskStatus.WAITING
    assert store.renew_runs([(kept.backend_id, "a"), (silent.backend_id, "b")]) == {
        kept.backend_id: Renewal.OK,
        silent.backend_id: Renewal.TAKEN,
    }


def test_an_offline_worker_ends_no_guarded_run_a_restart_puts_its_copies_on_notice(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run = dispatched(store, schedule_kind=ScheduleKind.ADAPTIVE, current_interval=S * 3600)
    assert store.guard_start(run.backend_id, node="n1", name="w1", tag="a", pid=10).granted
    at = datetime.now(UTC) + S
    store.record_worker_sightings([WorkerSighting("w1@n1", at, online=False, pid=10)])
    swept = store.sweep_silent_workers(now=at + S * 3600, timeout=S, apply=apply)
    assert not swept.lost  # the process running the body decides, not the main one
    assert store.end_worker_runs("w1@n1", at=at, apply=apply, pid=11) == []
    assert events(store, run.backend_id) == ["assigned", "pinged_late"]
    noticed = task_of(store, task.id)
    assert noticed.owner_tag == "a" and noticed.steal_start_at is not None
    # the copy is alive after all (its pool process outlived the main one)
    assert store.renew_runs([(run.backend_id, "a")]) == {run.backend_id: Renewal.OK}
    assert task_of(store, task.id).steal_start_at is None
    report = store.steal_expired_leases(ping_timeout=S * 60, grace=S / 1000, apply=apply)
    assert not report.stolen


def test_release_for_a_celery_retry_lets_the_retried_delivery_in(
    store: SQLAlchemyStore, plain_type: TaskType
) -> None:
    task, run = dispatched(store)
    assert store.guard_start(run.backend_id, node="n1", name="w1", tag="a").granted
    assert not store.release_start(run.backend_id, tag="other")
    assert store.release_start(run.backend_id, tag="a")
    stored = store.get_task_run(run.backend_id)
    assert stored is not None and stored.status is RunStatus.STARTED
    assert task_of(store, task.id).owner_tag is None
    assert store.guard_start(run.backend_id, node="n2", name="w2", tag="b").granted
    assert events(store, run.backend_id) == ["assigned", "retrying", "assigned"]


def test_a_late_real_outcome_replaces_lost(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    """The worker said offline (warm shutdown) and its run was ended lost
    after the grace; the run's success arrives afterwards: it replaces
    ``lost`` and the task's schedule is recomputed from it."""
    task, run = dispatched(store, schedule_kind=ScheduleKind.ADAPTIVE, current_interval=S * 3600)
    at = datetime.now(UTC)
    # a run no guard took (its start known from ``task-started`` only)
    store.start_task_run(run.backend_id, started=at - S, worker="w1@n1")
    [lost] = store.end_worker_runs("w1@n1", at=at, apply=apply)
    assert lost.status is RunStatus.LOST
    assert task_of(store, task.id).last_good_end_at is None
    done = at + S
    [ended] = store.end_task_runs(
        [RunEnd(run.backend_id, RunStatus.EVENTFUL, done, result={"status": "eventful"})],
        apply=apply,
    )
    assert ended is not None and ended.status is RunStatus.EVENTFUL and ended.ended == done
    assert events(store, run.backend_id)[-2:] == ["worker_offline", "late_outcome"]
    after = task_of(store, task.id)
    assert after.last_good_end_at == done and after.status is TaskStatus.WAITING
    assert after.next_run >= done + S * 3600  # the adaptive interval, from the real end
    # a second copy of the same outcome changes nothing
    [again] = store.end_task_runs([RunEnd(run.backend_id, RunStatus.EVENTFUL, done + S)])
    assert again is not None and again.ended == done


def test_a_late_outcome_supersedes_the_run_dispatched_meanwhile(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    task, run = dispatched(store)
    at = datetime.now(UTC)
    store.start_task_run(run.backend_id, started=at - S, worker="w1@n1")
    store.end_worker_runs("w1@n1", at=at, apply=apply)
    second = store.schedule_task_run(task.id or 0, now=at + S)  # dispatched again
    store.end_task_runs([RunEnd(run.backend_id, RunStatus.UNEVENTFUL, at + S)], apply=apply)
    replaced = store.get_task_run(second.backend_id)
    assert replaced is not None and replaced.status is RunStatus.CANCELLED
    assert task_of(store, task.id).status is TaskStatus.COMPLETED
    refused = store.guard_start(second.backend_id, node="n2", name="w2", tag="b", apply=apply)
    assert not refused.granted and refused.reason is Refusal.FINISHED_RUN


def test_stolen_lease_is_not_replaced_by_the_stopped_body_failure(
    store: SQLAlchemyStore, plain_type: TaskType, apply: ApplyOutcome
) -> None:
    _, run = dispatched(store)
    assert store.acquire_lease(run.backend_id, node="n1", name="w1", tag="a").granted
    tiny = timedelta(microseconds=1)
    store.steal_expired_leases(ping_timeout=tiny, grace=tiny, apply=apply)
    store.steal_expired_leases(ping_timeout=tiny, grace=tiny, apply=apply)
    stolen = store.get_task_run(run.backend_id)
    assert stolen is not None and stolen.status is RunStatus.LOST
    stopped = RunEnd(run.backend_id, RunStatus.FAILED, datetime.now(UTC), None, "LeaseStopped()")
    store.end_task_runs([stopped])
    kept = store.get_task_run(run.backend_id)
    # the take moved the token: the stop came under a stale one, and is no failure
    assert kept is not None and kept.status is RunStatus.SUPERSEDED
    assert kept.history[-1]["event"] == "stale_end"


def test_a_new_process_under_the_same_name_is_a_restart(
    store: SQLAlchemyStore, plain_type: TaskType
) -> None:
    at = datetime.now(UTC)
    assert store.record_worker_sightings([WorkerSighting("w1@n1", at, True, 2.0, 100)]) == []
    # offline then online again from the same process (a broker reconnect)
    for sighting in (
        WorkerSighting("w1@n1", at + S, False, None, 100),
        WorkerSighting("w1@n1", at + 2 * S, True, 2.0, 100),
    ):
        assert store.record_worker_sightings([sighting]) == []
    # a new process: a restart once the old one has stayed silent (a second
    # live worker under the name would go on sending)
    new = WorkerSighting("w1@n1", at + 3 * S, True, 2.0, 200)
    assert store.record_worker_sightings([new]) == []
    later = WorkerSighting("w1@n1", at + 13 * S, True, 2.0, 200)
    assert store.record_worker_sightings([later]) == [
        WorkerChange(WorkerChangeKind.RESTART, "w1@n1", at + 3 * S, 200, 100)
    ]
    [state] = store.get_workers()
    assert state.pid == 200 and state.online and state.other_pid is None
    # an old event of the first process, late, is no restart
    late = WorkerSighting("w1@n1", at, True, 2.0, 100)
    assert store.record_worker_sightings([late]) == []
