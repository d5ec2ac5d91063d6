"""Every task's condition level, read at each sample of a simulation.

The same levels as ``swh scheduler task status`` (:func:`policy.condition`
on each watched task), with two short cuts: a task is read again from the
store only when the simulation changed it since the last sample (its claim,
its run's events), and its condition is computed again only then or when
its level may have moved with time (:func:`policy.level_holds_until`).
Reading and judging every task at every sample was most of a
simulation's time; most tasks change in neither way between two samples.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime

from .. import policy
from ..domain.model import ScheduleKind, Task, TaskStatus, TaskType
from ..health.conditions import LEVELS, PAGE, WATCHED
from ..store import SchedulerStore, TaskFilter

#: a known task: the task as last read, its level, until when it holds,
#: and the cause of an ERROR (:func:`error_cause`; None at other levels)
Known = tuple[Task, str, datetime | None, str | None]

#: what keeps a task in ERROR, as :func:`error_cause` tells it
CAUSES = {
    "schedule": "in ERROR by construction: its schedule does not let it start before it "
    "is due (blackout windows, cooldown)",
    "failures": "its runs fail",
    "running": "its runs last longer than it is given",
    "waiting": "ready but not started in time (queue limit, the runner's pace, workers)",
}


def error_cause(
    task: Task, report: policy.ConditionReport, times: policy.StartTimes, now: datetime
) -> str:
    """Why ``task`` is in ERROR (a key of :data:`CAUSES`), from what the
    store and the policy engine say of it; the first that applies."""
    if report.reason is policy.Reason.GAVE_UP or task.failure_count > 0:
        return "failures"
    if task.owner_started_at is not None:
        return "running"
    if task.status is TaskStatus.WAITING and times.can_start_by > now:
        return "schedule"
    return "waiting"


class ConditionWatch:
    """Counts of tasks per type and level, sample after sample; with
    ``group_of``, also per group (:attr:`group_counts`, ``{group: {level:
    tasks}}`` at the last :meth:`counts`, and :attr:`group_causes`, ``{group:
    {cause: tasks in ERROR}}``)."""

    def __init__(
        self,
        store: SchedulerStore,
        types: Mapping[str, TaskType],
        group_of: Callable[[Task], str] | None = None,
    ) -> None:
        self.store, self.types = store, dict(types)
        self.group_of = group_of
        self.group_counts: dict[str, dict[str, int]] = {}
        self.group_causes: dict[str, dict[str, int]] = {}
        #: ``{group: (sum of its adaptive tasks' current intervals in
        #: seconds, tasks)}`` at the last :meth:`counts`
        self.group_intervals: dict[str, tuple[float, int]] = {}
        self._known: dict[int, Known] | None = None

    def counts(
        self, now: datetime, changed: Collection[int] | None = None
    ) -> dict[str, dict[str, int]]:
        """``{type: {level: tasks}}`` at ``now``. ``changed``: the ids of the
        tasks written since the last call (None: read every task again)."""
        if self._known is None or changed is None:
            self._known = {}
            criteria = TaskFilter(status=WATCHED)
            after = 0
            while page := self.store.search_tasks(criteria, after_id=after, limit=PAGE):
                after = page[-1].id or 0
                self._learn(page, now)
        else:
            # (a claim may put a task in a blackout window back unseen)
            again = set(changed) | {i for i, (t, *_) in self._known.items() if t.blackout_periods}
            ids = sorted(again)
            for start in range(0, len(ids), PAGE):
                chunk = ids[start : start + PAGE]
                found = self.store.get_tasks(chunk)
                for gone in set(chunk) - {t.id for t in found}:
                    self._known.pop(gone, None)
                self._learn(found, now)
        counts: dict[str, dict[str, int]] = {}
        groups: dict[str, dict[str, int]] = {}
        causes: dict[str, dict[str, int]] = {}
        intervals: dict[str, tuple[float, int]] = {}
        for task_id, (task, level, until, cause) in self._known.items():
            if until is not None and now > until:
                self._known[task_id] = known = self._judge(task, now)
                level, cause = known[1], known[3]
            per_type = counts.setdefault(task.type, dict.fromkeys(LEVELS, 0))
            per_type[level] += 1
            if self.group_of is not None:
                group = self.group_of(task)
                groups.setdefault(group, dict.fromkeys(LEVELS, 0))[level] += 1
                if cause is not None:
                    per_group = causes.setdefault(group, {})
                    per_group[cause] = per_group.get(cause, 0) + 1
                interval = task.current_interval
                if task.schedule_kind is ScheduleKind.ADAPTIVE and interval is not None:
                    total, tasks = intervals.get(group, (0.0, 0))
                    intervals[group] = (total + interval.total_seconds(), tasks + 1)
        self.group_counts, self.group_causes = groups, causes
        self.group_intervals = intervals
        return counts

    def _learn(self, tasks: Collection[Task], now: datetime) -> None:
        assert self._known is not None
        for task in tasks:
            assert task.id is not None
            if task.status not in WATCHED:
                self._known.pop(task.id, None)
                continue
            known = self._known.get(task.id)
            if known is not None and known[0] == task:
                continue  # read again, unchanged: judged when counted
            self._known[task.id] = self._judge(task, now)

    def _judge(self, task: Task, now: datetime) -> Known:
        task_type = self.types[task.type]
        times = policy.start_times(task, task_type, now)
        report = policy.condition(task, task_type, now, times=times)
        until = policy.level_holds_until(task, task_type, now, times=times)
        error = report.level is policy.Condition.ERROR
        return (
            task,
            report.level.value,
            until,
            error_cause(task, report, times, now) if error else None,
        )
