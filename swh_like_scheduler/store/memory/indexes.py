"""The memory store's indexes: what a database's indexes and aggregates
give the SQL store, kept up to date at each write of a task or a run.

They are derived from the rows only: a write that is undone rebuilds them
from the rows put back (:meth:`Indexes.build`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from sortedcontainers import SortedList  # type: ignore[import-untyped]

from ...domain.model import Priority, RunStatus, ScheduleKind, Task, TaskRun, TaskStatus, TaskType

#: above every task id (the end of a range of ``(instant, id)`` entries)
_TOP = 1 << 63
#: the statuses in which a task is live (waiting or dispatched)
LIVE = (TaskStatus.WAITING, TaskStatus.SCHEDULED)


def demand_share(task: Task, kind: TaskType | None) -> float | None:
    """One task's demand, ``avg / (I + avg)`` (the SQL store's
    ``_demand_share``; ``None`` without a known duration)."""
    avg = task.expected_duration or task.average_good_duration
    interval = task.current_interval or (kind.default_interval if kind is not None else None)
    if avg is None or interval is None:
        return None
    total = (interval + avg).total_seconds()
    return avg.total_seconds() / total if total else None


class Indexes:
    """Per type (and class), the waiting tasks by ``next_run`` and by
    deadline, the dispatched ones, the demand shares of the live adaptive
    ones; per task its runs; per type its runs going on and ended."""

    def __init__(self) -> None:
        #: ``(next_run, id)`` of the waiting tasks, per type and class
        self.waiting: dict[tuple[str, Priority], Any] = {}
        #: ``(deadline, id)`` of the waiting tasks, per type and class
        self.deadlines: dict[tuple[str, Priority], Any] = {}
        #: ``(next_run, id)`` of the waiting adaptive tasks, per type
        self.adaptive: dict[str, Any] = {}
        #: the ids of the ``scheduled`` tasks, per type
        self.scheduled: dict[str, set[int]] = {}
        #: the waiting tasks with a catch-up setting of their own, per type
        self.own_catch_up: dict[str, set[int]] = {}
        #: the demand share of each live adaptive task, per type
        self.shares: dict[str, dict[int, float | None]] = {}
        #: the run ids of each task, in the order they were created
        self.task_runs: dict[int, list[int]] = {}
        #: the ids of the runs going on (``started``), per type of their task
        self.started: dict[str, set[int]] = {}
        #: ``(ended, run id)`` of the ended runs that started, per type of their task
        self.ended: dict[str, Any] = {}

    @classmethod
    def build(
        cls,
        types: dict[str, TaskType],
        tasks: Iterable[Task],
        runs: Iterable[TaskRun],
        task_types: dict[int, str],
    ) -> Indexes:
        """The indexes of these rows (``task_types``: each task's type)."""
        made = cls()
        for task in tasks:
            made.add_task(task, types.get(task.type))
        for run in sorted(runs, key=lambda r: r.id or 0):
            made.add_run(run, task_types.get(run.task_id))
        return made

    # -- tasks ------------------------------------------------------------------

    def add_task(self, task: Task, kind: TaskType | None) -> None:
        task_id = task.id or 0
        name = task.type
        if task.status is TaskStatus.WAITING:
            _sorted(self.waiting, (name, task.priority)).add((task.next_run, task_id))
            _sorted(self.deadlines, (name, task.priority)).add((task.deadline, task_id))
            if task.schedule_kind is ScheduleKind.ADAPTIVE:
                _sorted(self.adaptive, name).add((task.next_run, task_id))
            if task.catch_up is not None or task.catch_up_grace is not None:
                self.own_catch_up.setdefault(name, set()).add(task_id)
        elif task.status is TaskStatus.SCHEDULED:
            self.scheduled.setdefault(name, set()).add(task_id)
        if task.schedule_kind is ScheduleKind.ADAPTIVE and task.status in LIVE:
            self.shares.setdefault(name, {})[task_id] = demand_share(task, kind)

    def remove_task(self, task: Task) -> None:
        task_id = task.id or 0
        name = task.type
        if task.status is TaskStatus.WAITING:
            self.waiting[(name, task.priority)].remove((task.next_run, task_id))
            self.deadlines[(name, task.priority)].remove((task.deadline, task_id))
            if task.schedule_kind is ScheduleKind.ADAPTIVE:
                self.adaptive[name].remove((task.next_run, task_id))
            self.own_catch_up.get(name, set()).discard(task_id)
        elif task.status is TaskStatus.SCHEDULED:
            self.scheduled[name].discard(task_id)
        self.shares.get(name, {}).pop(task_id, None)

    def reshare(self, kind: TaskType, tasks: dict[int, Task]) -> None:
        """The shares of a type's tasks again (its default interval changed)."""
        shares = self.shares.get(kind.type, {})
        for task_id in shares:
            shares[task_id] = demand_share(tasks[task_id], kind)

    # -- runs -------------------------------------------------------------------

    def add_run(self, run: TaskRun, type_name: str | None) -> None:
        run_id = run.id or 0
        runs = self.task_runs.setdefault(run.task_id, [])
        if not runs or runs[-1] < run_id:
            runs.append(run_id)
        elif run_id not in runs:
            runs.append(run_id)
            runs.sort()
        if type_name is None or run.started is None:
            return
        if run.ended is not None:
            _sorted(self.ended, type_name).add((run.ended, run_id))
        elif run.status is RunStatus.STARTED:
            self.started.setdefault(type_name, set()).add(run_id)

    def remove_run(self, run: TaskRun, type_name: str | None, *, gone: bool) -> None:
        """Take ``run`` out (``gone``: deleted, not about to be written again)."""
        run_id = run.id or 0
        if gone:
            runs = self.task_runs.get(run.task_id)
            if runs is not None and run_id in runs:
                runs.remove(run_id)
        if type_name is None or run.started is None:
            return
        if run.ended is not None:
            self.ended[type_name].remove((run.ended, run_id))
        elif run.status is RunStatus.STARTED:
            self.started[type_name].discard(run_id)

    # -- reads ------------------------------------------------------------------

    def ready(self, name: str, priority: Priority, until: datetime) -> Iterator[int]:
        """The ids of the waiting tasks of a type and class with a
        ``next_run`` no later than ``until``, earliest first."""
        found = self.waiting.get((name, priority))
        if not found:
            return iter(())
        return (task_id for _, task_id in found.irange(maximum=(until, _TOP)))

    def count_ready(self, name: str, priority: Priority, until: datetime) -> int:
        found = self.waiting.get((name, priority))
        return found.bisect_right((until, _TOP)) if found else 0

    def earliest(self, name: str, priority: Priority) -> datetime | None:
        found = self.waiting.get((name, priority))
        return found[0][0] if found else None

    def by_deadline(self, name: str, priority: Priority) -> Iterator[int]:
        """The ids of the waiting tasks of a type and class, earliest
        deadline first (then id)."""
        return (task_id for _, task_id in self.deadlines.get((name, priority), ()))

    def backlog(self, name: str, before: datetime) -> int:
        """How many adaptive tasks of a type wait with a ``next_run`` before ``before``."""
        found = self.adaptive.get(name)
        return found.bisect_left((before, -1)) if found else 0

    def ended_between(self, name: str, after: datetime, until: datetime) -> Iterator[int]:
        """The run ids of a type that ended in ``(after, until]``."""
        found = self.ended.get(name)
        if not found:
            return iter(())
        entries = found.irange((after, _TOP), (until, _TOP), inclusive=(False, True))
        return (run_id for _, run_id in entries)


def _sorted(table: dict[Any, Any], key: Any) -> Any:
    found = table.get(key)
    if found is None:
        found = table[key] = SortedList()
    return found
