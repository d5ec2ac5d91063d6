"""``--from-store``: a simulation of the next days of a live scheduler.

The task types and the live tasks (waiting or dispatched) of a store are
copied into the simulation's own database, read only: nothing is written to
the live one. What the store does not know is assumed, and said in the
workload's description: each task's runs last its average good duration
on average (else the type's expected duration, else a minute), log-normal
with sigma 0.5; they do not fail; an adaptive task's visit finds a change with the
probability of a change rate of one per current interval. Runs dispatched
in the live system start afresh in the simulation (their task is waiting
again, at its slot).

Each type's load (its demand, :attr:`.workload.Workload.given_demand`) is
counted from each task's own schedule and run duration
(:func:`.cadence.runs_within`): an adaptive task every current interval
(after ``--interval``), a periodic one every cooldown plus a run, a cron
task at its firings within the horizon, a one-shot once when it falls due
within it; not from the type's default interval, which the tasks' own
intervals may have left far behind (and which a periodic or cron task never
had)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..domain.exceptions import InvalidInput
from ..domain.model import (
    OWNER_CLEARED,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
    arguments_hash,
)
from ..policy import start_times
from ..store import SchedulerStore, TaskFilter
from .behaviour import TaskBehaviour
from .cadence import runs_within
from .workload import Duration, RunnerSettings, TaskGroup, Workload

#: tasks read per page from the live store
PAGE = 5000
#: the run duration of a task nothing is known about
UNKNOWN_DURATION = timedelta(minutes=1)
LIVE_SIGMA = 0.5


def from_store(
    store: SchedulerStore,
    now: datetime,
    *,
    days: float = 1.0,
    workers: Mapping[str, int] | None = None,
    intervals: Mapping[str, timedelta] | None = None,
    seed: int = 1,
    runner: RunnerSettings | None = None,
    failures: Mapping[str, tuple[float, float]] | None = None,
) -> tuple[Workload, list[tuple[Task, TaskBehaviour]]]:
    """The workload of ``store``'s types from ``now`` on, and its live tasks
    with their assumed behaviour (for :class:`.engine.Simulation`'s
    ``tasks``). ``workers``: worker slots per type (default 1 each);
    ``intervals``: a new default interval per type, also given to every
    adaptive task of the type (its next run and deadline recomputed);
    ``failures``: per type, the shares of runs that fail (to be retried)
    and that fail for good (default: none)."""
    workers, intervals = dict(workers or {}), dict(intervals or {})
    failures = dict(failures or {})
    types = {t.type: t for t in store.get_task_types()}
    for name in sorted({*workers, *intervals} - set(types)):
        raise InvalidInput("type", f"{name!r} is not a task type of the store")
    for name, interval in intervals.items():
        types[name] = types[name].updated(default_interval=interval)
    groups = {
        name: TaskGroup(
            name=f"live tasks of {name}",
            type=name,
            count=0,
            fields={},
            spread=(timedelta(0), timedelta(0)),
            duration=Duration.of_mean(_typical(t), LIVE_SIGMA),
            failure=failures.get(name, (0.0, 0.0))[0],
            permfailure=failures.get(name, (0.0, 0.0))[1],
        )
        for name, t in types.items()
    }
    given: list[tuple[Task, TaskBehaviour]] = []
    counts = dict.fromkeys(types, 0)
    horizon = timedelta(days=days)
    demand = dict.fromkeys(types, 0.0)
    criteria = TaskFilter(status=(TaskStatus.WAITING, TaskStatus.SCHEDULED))
    after = 0
    while page := store.search_tasks(criteria, after_id=after, limit=PAGE):
        after = page[-1].id or 0
        for task in page:
            copied = _copy(task, types[task.type], len(given), intervals.get(task.type), now)
            average = task.expected_duration or task.average_good_duration
            change = copied.current_interval.total_seconds() if copied.current_interval else None
            behaviour = TaskBehaviour(
                groups[task.type],
                change if task.schedule_kind is ScheduleKind.ADAPTIVE else None,
                Duration.of_mean(average, LIVE_SIGMA) if average else None,
            )
            given.append((copied, behaviour))
            counts[task.type] += 1
            mean = (behaviour.duration or behaviour.group.duration).mean
            runs = runs_within(copied, mean, now, horizon)
            demand[task.type] += runs * mean.total_seconds() / horizon.total_seconds()
    workload = Workload(
        name="live store",
        description=(
            f"the {len(given):,} live tasks of the store at {now.isoformat()}; run durations "
            "assumed from each task's average (their mean; log-normal, sigma 0.5), "
            + ("failures at each type's given shares" if failures else "no failures")
            + ", adaptive visits changed at one change per current interval"
        ),
        start=now,
        days=days,
        seed=seed,
        types=tuple(types.values()),
        workers={name: workers.get(name, 1) for name in types},
        groups=tuple(replace(g, count=counts[name]) for name, g in groups.items()),
        runner=runner or RunnerSettings(),
        given_demand=demand,
    )
    return workload, given


def _typical(task_type: TaskType) -> timedelta:
    expected = task_type.max_expected_duration
    return expected / 2 if expected else UNKNOWN_DURATION


def _copy(
    task: Task, task_type: TaskType, index: int, interval: timedelta | None, now: datetime
) -> Task:
    """The task as the simulation creates it: new id, arguments naming its
    behaviour, no key, no owner, waiting. Built as the store builds a task
    it reads back (:meth:`Task.stored`): the live task was checked when it
    was written, and what changes here (two integers for arguments, fields
    emptied) needs no check again."""
    values: dict[str, Any] = {
        name: value for name, value in vars(task).items() if not name.startswith("_")
    }
    values.update(
        id=None,
        key=None,
        args=(0, index),
        kwargs={},
        status=TaskStatus.WAITING,
        dont_run_on_nodes=(),
        **OWNER_CLEARED,
    )
    copied = Task.stored(values, arguments_hash=arguments_hash((0, index), {}))
    if interval is not None and task.schedule_kind is ScheduleKind.ADAPTIVE:
        copied = copied.updated(current_interval=interval)
        times = start_times(copied, task_type, now)
        copied = copied.updated(next_run=times.can_start_by, deadline=times.should_start_by)
    return copied
