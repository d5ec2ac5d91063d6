"""Every task's condition level, read at each sample of a simulation.

The same levels as ``swh scheduler task status`` (:func:`policy.condition`
on each watched task, read from the store), computed again for a task only
when it changed since the last sample or when its level may have moved
with time (:func:`policy.level_holds_until`): most tasks are neither
between two samples, and computing thousands of conditions per sample was
most of a simulation's time."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from .. import policy
from ..conditions import LEVELS, PAGE, WATCHED
from ..model import Task, TaskType
from ..store import SchedulerStore, TaskFilter


class ConditionWatch:
    """Counts of tasks per type and level, sample after sample."""

    def __init__(self, store: SchedulerStore, types: Mapping[str, TaskType]) -> None:
        self.store, self.types = store, dict(types)
        #: per task id: the task as last read, its level, until when it holds
        self._known: dict[int, tuple[Task, str, datetime | None]] = {}
        self._until: datetime | None = None

    def counts(self, now: datetime) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        known: dict[int, tuple[Task, str, datetime | None]] = {}
        criteria = TaskFilter(status=WATCHED)
        after = 0
        while page := self.store.search_tasks(criteria, after_id=after, limit=PAGE):
            after = page[-1].id or 0
            for task in page:
                assert task.id is not None
                level = self._level(task, now)
                known[task.id] = (task, level, self._until)
                per_type = counts.setdefault(task.type, dict.fromkeys(LEVELS, 0))
                per_type[level] += 1
        self._known = known  # tasks no longer watched are forgotten
        return counts

    def _level(self, task: Task, now: datetime) -> str:
        assert task.id is not None
        seen = self._known.get(task.id)
        if seen is not None:
            before, level, until = seen
            if (until is None or now <= until) and before == task:
                self._until = until
                return level
        task_type = self.types[task.type]
        times = policy.start_times(task, task_type, now)
        report = policy.condition(task, task_type, now, times=times)
        self._until = policy.level_holds_until(task, task_type, now, times=times)
        return report.level.value
