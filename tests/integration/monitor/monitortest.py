"""Helpers of the monitor tests: task types, runs on a named worker, apply."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskRun, TaskType
from swh_like_scheduler.policy import prepare_new_task
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.interface import ApplyOutcome

H = timedelta(hours=1)
S = timedelta(seconds=1)


def plain_type(store: SQLAlchemyStore, name: str = "plain", **fields: object) -> TaskType:
    return store.create_task_type(
        TaskType(
            type=name,
            backend_name=f"tests.monitor.{name}",
            default_interval=H,
            min_interval=timedelta(minutes=10),
            max_interval=timedelta(days=1),
            backoff_factor=2.0,
            **fields,  # type: ignore[arg-type]
        )
    )


def applier(store: SQLAlchemyStore) -> ApplyOutcome:
    return outcome_applier(TaskTypeCache(store), random.Random(0))


def adaptive_task(
    store: SQLAlchemyStore,
    now: datetime,
    n: int,
    type: str = "plain",
    deadline: datetime | None = None,
) -> Task:
    """An adaptive task ready since an hour, due by ``deadline`` (default in an hour)."""
    [task] = store.create_tasks(
        [
            Task(
                type=type,
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=now - H,
                deadline=now + H if deadline is None else deadline,
            )
        ],
        now=now - H,
    )
    return task


def run_on(
    store: SQLAlchemyStore,
    now: datetime,
    n: int,
    worker: str | None,
    *,
    started: datetime | None = None,
    type: str = "plain",
) -> tuple[Task, TaskRun]:
    """A task with a run dispatched at ``now - 1 h``, started on ``worker``
    at ``started`` (not started when ``worker`` is None)."""
    task = adaptive_task(store, now, n, type)
    assert task.id is not None
    run = store.schedule_task_run(task.id, now=now - H)
    if worker is not None:
        started_run = store.start_task_run(run.backend_id, started=started or now, worker=worker)
        assert started_run is not None
        run = started_run
    return task, run


def oneshot(
    store: SQLAlchemyStore,
    task_type: TaskType,
    at: datetime,
    n: int,
    *,
    max_delay: timedelta | None = None,
    created: datetime | None = None,
) -> Task:
    """A one-shot task for instant ``at``, prepared by the policy as a client
    would (deadline = at + max_delay)."""
    task = prepare_new_task(
        Task(
            type=task_type.type,
            args=(n,),
            schedule_kind=ScheduleKind.ONESHOT,
            max_delay=max_delay,
            next_run=at,
            deadline=at,
        ),
        task_type,
        created or at - H,
    )
    [made] = store.create_tasks([task], now=created or at - H)
    return made


def task_of(store: SQLAlchemyStore, task: Task) -> Task:
    [found] = store.get_tasks([task.id or 0])
    return found


def run_of(store: SQLAlchemyStore, run: TaskRun) -> TaskRun:
    found = store.get_task_run(run.backend_id)
    assert found is not None
    return found
