"""``task explain``'s run state reads, from the store, the live workers
without task events that may hold a run never seen to start
(:func:`swh_like_scheduler.health.conditions.latest_run_state` with
``backend``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.domain.records import BlindWindow, WorkerSighting
from swh_like_scheduler.health.conditions import latest_run_state
from swh_like_scheduler.policy import RunPhase
from swh_like_scheduler.store import SQLAlchemyStore

MIN = timedelta(minutes=1)
H = timedelta(hours=1)


@pytest.fixture
def dispatched(store: SQLAlchemyStore, sleep_type: TaskType, now: Any) -> Task:
    """A task whose run was dispatched at ``now`` and never seen to start."""
    [task] = store.create_tasks(
        [
            Task(
                type="sleep",
                args=(1,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=now - H,
                deadline=now,
            )
        ],
        now=now - H,
    )
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)
    store.mark_published([claimed.batch], at=now)
    [found] = store.get_tasks([task.id or 0])
    return found


def worker(store: SQLAlchemyStore, now: Any, name: str, window: BlindWindow | None) -> None:
    store.record_worker_sightings([WorkerSighting(name, now - H, True, 2.0, 4242)])
    if window is not None:
        store.mark_blind_workers([window])


def phase(store: SQLAlchemyStore, task: Task, now: Any, backend: str | None) -> Any:
    state = latest_run_state(store, task, now + 5 * MIN, queue="sleep", backend=backend)
    assert state is not None
    return state


def test_a_live_worker_without_task_events_makes_the_run_unknown(
    store: SQLAlchemyStore, sleep_type: TaskType, dispatched: Task, now: Any
) -> None:
    assert phase(store, dispatched, now, sleep_type.backend_name).phase is RunPhase.QUEUED
    worker(store, now, "plain@box", BlindWindow("plain@box", since=now - 30 * MIN))
    worker(store, now, "good@box", None)
    state = phase(store, dispatched, now, sleep_type.backend_name)
    assert state.phase is RunPhase.UNKNOWN
    assert "for worker plain@box, which sends no task events" in state.detail
    assert "good@box" not in state.detail
    # without the type's Celery task, the workers are not read
    assert phase(store, dispatched, now, None).phase is RunPhase.QUEUED


def test_a_window_of_other_tasks_or_closed_before_the_dispatch_holds_nothing(
    store: SQLAlchemyStore, sleep_type: TaskType, dispatched: Task, now: Any
) -> None:
    worker(store, now, "a@box", BlindWindow("a@box", now - H, now - H, ("proj.other",)))
    worker(store, now, "b@box", BlindWindow("b@box", now - H, now - MIN, None))
    assert phase(store, dispatched, now, sleep_type.backend_name).phase is RunPhase.QUEUED
    # a window that closed after the dispatch: that worker may hold it
    worker(
        store, now, "c@box", BlindWindow("c@box", now - H, now + MIN, (sleep_type.backend_name,))
    )
    state = phase(store, dispatched, now, sleep_type.backend_name)
    assert state.phase is RunPhase.UNKNOWN and "worker c@box," in state.detail


def test_an_offline_worker_or_a_started_run_is_known(
    store: SQLAlchemyStore, sleep_type: TaskType, dispatched: Task, now: Any
) -> None:
    worker(store, now, "plain@box", BlindWindow("plain@box", since=now - 30 * MIN))
    store.record_worker_sightings([WorkerSighting("plain@box", now, False, 2.0, 4242)])
    assert phase(store, dispatched, now, sleep_type.backend_name).phase is RunPhase.QUEUED
    store.record_worker_sightings([WorkerSighting("plain@box", now + MIN, True, 2.0, 4242)])
    assert phase(store, dispatched, now, sleep_type.backend_name).phase is RunPhase.UNKNOWN
    [run] = store.get_task_runs(dispatched.id or 0, limit=1)
    store.start_task_run(run.backend_id, started=now + 2 * MIN, worker="good@box")
    assert phase(store, dispatched, now, sleep_type.backend_name).phase is RunPhase.RUNNING
