"""The heartbeat of a worker process, beat by beat, on SQLite and PostgreSQL:
what it renews, when it records an end itself, how it tells a body that
its run was taken (:mod:`swh_like_scheduler.worker.heartbeat`)."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from waiting import wait_until

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
from swh_like_scheduler.store.interface import RunEnd
from swh_like_scheduler.worker.heartbeat import BodyOutcome, Heartbeat, RunTaken

S = timedelta(seconds=1)
TINY = timedelta(milliseconds=1)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def beat(store: SQLAlchemyStore, clock: Clock) -> Heartbeat:
    store.create_task_type(
        TaskType(type="plain", backend_name="tests.heartbeat", default_interval=S * 3600)
    )
    apply = outcome_applier(TaskTypeCache(store), random.Random(1))
    return Heartbeat(store, apply, every=10, clock=clock, background=False)


def started(store: SQLAlchemyStore, key: str, tag: str) -> tuple[Task, TaskRun]:
    now = datetime.now(UTC) - timedelta(minutes=1)
    [task] = store.create_tasks(
        [
            Task(
                type="plain",
                key=key,
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=now,
                deadline=now,
            )
        ],
        now=now,
    )
    run = store.schedule_task_run(task.id or 0, now=now)
    assert store.guard_start(run.backend_id, node="n", name="w", tag=tag).granted
    return task, run


def task_of(store: SQLAlchemyStore, task: Task) -> Task:
    [found] = store.get_tasks([task.id or 0])
    return found


def test_a_run_is_renewed_once_it_was_held_for_a_beat(
    store: SQLAlchemyStore, beat: Heartbeat, clock: Clock
) -> None:
    task, run = started(store, "a", "t")
    beat.hold(run.backend_id, "t")
    clock.now += 9
    assert beat.beat().renewed == 0  # too young: a short body costs no write
    assert task_of(store, task).owner_last_ping_at is None
    clock.now += 1
    assert beat.beat().renewed == 1
    assert task_of(store, task).owner_last_ping_at is not None
    assert beat.held() == {run.backend_id: "t"}


def test_an_end_the_listener_recorded_is_let_go(
    store: SQLAlchemyStore, beat: Heartbeat, clock: Clock
) -> None:
    _, run = started(store, "a", "t")
    beat.hold(run.backend_id, "t")
    beat.ended(run.backend_id, BodyOutcome({"status": "eventful"}))
    store.end_task_runs([RunEnd(run.backend_id, RunStatus.UNEVENTFUL, datetime.now(UTC))])
    clock.now += 10
    report = beat.beat()
    assert (report.renewed, report.finished, report.recorded) == (0, 1, ())
    assert beat.held() == {}
    ended = store.get_task_run(run.backend_id)
    assert ended is not None and ended.status is RunStatus.UNEVENTFUL  # the listener's, kept


def test_an_end_nobody_recorded_is_written_by_the_worker_after_three_beats(
    store: SQLAlchemyStore, beat: Heartbeat, clock: Clock
) -> None:
    task, run = started(store, "a", "t")
    beat.hold(run.backend_id, "t")
    clock.now += 5
    beat.ended(run.backend_id, BodyOutcome({"status": "eventful", "pages": 3}))
    for _ in range(2):  # renewed meanwhile: the run is not abandoned
        clock.now += 10
        report = beat.beat()
        assert report.renewed == 1 and report.recorded == ()
    clock.now += 10  # 30 s (three beats) after the body's end
    assert beat.beat().recorded == (run.backend_id,)
    recorded = store.get_task_run(run.backend_id)
    assert recorded is not None and recorded.status is RunStatus.EVENTFUL
    assert recorded.result == {"status": "eventful", "pages": 3}
    after = task_of(store, task)
    assert after.status is TaskStatus.COMPLETED and after.owner_tag is None
    assert beat.held() == {}


def test_a_failed_or_timed_out_body_is_recorded_as_the_listener_would(
    store: SQLAlchemyStore, beat: Heartbeat, clock: Clock
) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    _, failed = started(store, "f", "t1")
    _, limited = started(store, "l", "t2")
    for run, tag in ((failed, "t1"), (limited, "t2")):
        beat.hold(run.backend_id, tag)
    beat.ended(failed.backend_id, BodyOutcome(exception=ValueError("no such page")))
    beat.ended(limited.backend_id, BodyOutcome(exception=SoftTimeLimitExceeded()))
    assert sorted(beat.flush()) == sorted([failed.backend_id, limited.backend_id])
    one = store.get_task_run(failed.backend_id)
    two = store.get_task_run(limited.backend_id)
    assert one is not None and one.status is RunStatus.FAILED
    assert one.error is not None and "no such page" in one.error
    assert two is not None and two.status is RunStatus.TIMED_OUT


def test_at_exit_the_ended_runs_are_recorded_the_running_ones_left(
    store: SQLAlchemyStore, beat: Heartbeat, clock: Clock
) -> None:
    _, done = started(store, "done", "t1")
    _, running = started(store, "running", "t2")
    beat.hold(done.backend_id, "t1")
    beat.hold(running.backend_id, "t2")
    beat.ended(done.backend_id, BodyOutcome({"status": "uneventful"}))
    assert beat.flush() == (done.backend_id,)
    first = store.get_task_run(done.backend_id)
    second = store.get_task_run(running.backend_id)
    assert first is not None and first.status is RunStatus.UNEVENTFUL
    assert second is not None and second.status is RunStatus.STARTED


def test_a_body_whose_run_was_taken_is_stopped(
    store: SQLAlchemyStore, beat: Heartbeat, clock: Clock
) -> None:
    task, run = started(store, "a", "t")
    caught: list[BaseException] = []
    holding = threading.Event()

    def body() -> None:
        beat.hold(run.backend_id, "t")
        holding.set()
        outcome = None
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                time.sleep(0.01)  # Python code between sleeps: the stop lands here
        except RunTaken as stop:
            caught.append(stop)
            outcome = BodyOutcome(exception=stop)
        finally:
            beat.ended(run.backend_id, outcome)

    thread = threading.Thread(target=body)
    thread.start()
    holding.wait(10)
    time.sleep(0.01)
    store.steal_expired_leases(ping_timeout=TINY, grace=TINY)
    time.sleep(0.01)
    assert store.steal_expired_leases(ping_timeout=TINY, grace=TINY).stolen
    clock.now += 10
    assert beat.beat().taken == (run.backend_id,)
    thread.join(10)
    assert not thread.is_alive() and len(caught) == 1
    wait_until(lambda: beat.held() == {}, 5, "the taken run to be forgotten")
    assert task_of(store, task).owner_tag is None


def test_a_retry_releases_the_run(store: SQLAlchemyStore, beat: Heartbeat, clock: Clock) -> None:
    _, run = started(store, "a", "t")
    beat.hold(run.backend_id, "t")
    beat.release(run.backend_id)
    clock.now += 10
    assert beat.beat().renewed == 0 and beat.held() == {}


def test_the_thread_beats_by_itself(store: SQLAlchemyStore, clock: Clock) -> None:
    store.create_task_type(
        TaskType(type="plain", backend_name="tests.heartbeat", default_interval=S * 3600)
    )
    apply = outcome_applier(TaskTypeCache(store), random.Random(1))
    beat = Heartbeat(store, apply, every=0.1)  # the real clock
    task, run = started(store, "a", "t")
    try:
        beat.hold(run.backend_id, "t")
        wait_until(lambda: task_of(store, task).owner_last_ping_at is not None, 10, "a renewal")
        beat.ended(run.backend_id, BodyOutcome({"status": "eventful"}))
        wait_until(
            lambda: task_of(store, task).status is TaskStatus.COMPLETED, 10, "the end recorded"
        )
        # nothing held: the thread ends, and the next hold starts another
        wait_until(lambda: beat._thread is None, 10, "the idle thread to end")
    finally:
        beat.close()
