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

import heapq
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta

from .. import policy
from ..domain.model import ScheduleKind, Task, TaskStatus, TaskType
from ..health.conditions import LEVELS, PAGE, WATCHED
from ..store import SchedulerStore, TaskFilter

#: a known task: the task as last read, its level, until when it holds,
#: and the cause of an ERROR (:func:`error_cause`; None at other levels)
Known = tuple[Task, str, datetime | None, str | None]

#: a task's share of the sums: type, level, group, cause of an ERROR, and
#: its current interval in microseconds when it is adaptive
_Share = tuple[str, str, str | None, str | None, int | None]
_MICROSECOND = timedelta(microseconds=1)

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
    {cause: tasks in ERROR}}``).

    The counts are kept as running sums: a task's share is taken out and
    put back when it is judged again, and a heap of the instants until
    which each level holds names the tasks to judge again as time passes;
    a sample costs the tasks that changed or whose level may have moved,
    not a walk over every task (at 100,000 tasks and a sample every 10
    minutes, that walk was a fifth of a forecast's time)."""

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
        self._reset()
        self._known: dict[int, Known] | None = None  # nothing read yet

    def _reset(self) -> None:
        self._known = {}
        #: each known task's share of the sums (:meth:`_share`)
        self._shares: dict[int, _Share] = {}
        self._types: dict[str, dict[str, int]] = {}
        self._groups: dict[str, dict[str, int]] = {}
        self._causes: dict[str, dict[str, int]] = {}
        #: ``{group: [microseconds, tasks]}`` (integers: exact sums)
        self._intervals: dict[str, list[int]] = {}
        #: ``(until, task id)``; an entry whose task's ``until`` has since
        #: changed is stale and skipped
        self._expiring: list[tuple[datetime, int]] = []
        #: tasks with blackout windows (a claim may put one back unseen)
        self._blackout: set[int] = set()

    def seed(self, tasks: Collection[Task], now: datetime) -> None:
        """Start from ``tasks``, every watched task exactly as the store
        holds it at ``now`` (a simulation's tasks as it created them): the
        next :meth:`counts` reads only the tasks changed since, instead of
        every task."""
        self._reset()
        self._learn(tasks, now)

    def counts(
        self, now: datetime, changed: Collection[int] | None = None
    ) -> dict[str, dict[str, int]]:
        """``{type: {level: tasks}}`` at ``now``. ``changed``: the ids of the
        tasks written since the last call (None: read every task again)."""
        if self._known is None or changed is None:
            self._reset()
            criteria = TaskFilter(status=WATCHED)
            after = 0
            while page := self.store.search_tasks(criteria, after_id=after, limit=PAGE):
                after = page[-1].id or 0
                self._learn(page, now)
        else:
            ids = sorted(set(changed) | self._blackout)
            for start in range(0, len(ids), PAGE):
                chunk = ids[start : start + PAGE]
                found = self.store.get_tasks(chunk)
                for gone in set(chunk) - {t.id for t in found}:
                    self._drop(gone)
                self._learn(found, now)
        assert self._known is not None
        again: dict[int, Task] = {}
        while self._expiring and self._expiring[0][0] < now:
            until, task_id = heapq.heappop(self._expiring)
            known = self._known.get(task_id)
            if known is not None and known[2] == until:
                again[task_id] = known[0]
        for task_id, task in again.items():  # after the pops: a level may hold until before now
            self._put(task_id, self._judge(task, now))
        self.group_counts = {g: dict(c) for g, c in self._groups.items() if any(c.values())}
        causes = {g: {c: n for c, n in per.items() if n} for g, per in self._causes.items()}
        self.group_causes = {g: per for g, per in causes.items() if per}
        self.group_intervals = {
            g: (micro / 1e6, tasks) for g, (micro, tasks) in self._intervals.items() if tasks
        }
        return {t: dict(c) for t, c in self._types.items() if any(c.values())}

    def _learn(self, tasks: Collection[Task], now: datetime) -> None:
        assert self._known is not None
        for task in tasks:
            assert task.id is not None
            if task.status not in WATCHED:
                self._drop(task.id)
                continue
            known = self._known.get(task.id)
            if known is not None and known[0] == task:
                continue  # read again, unchanged: judged again when its level may move
            self._put(task.id, self._judge(task, now))

    def _put(self, task_id: int, known: Known) -> None:
        """``known`` in place of what was known of the task, in the sums."""
        assert self._known is not None
        self._drop(task_id)
        task, level, until, cause = known
        self._known[task_id] = known
        share = self._share(task, level, cause)
        self._shares[task_id] = share
        self._count(share, 1)
        if until is not None:
            heapq.heappush(self._expiring, (until, task_id))
        if task.blackout_periods:
            self._blackout.add(task_id)

    def _drop(self, task_id: int) -> None:
        assert self._known is not None
        if self._known.pop(task_id, None) is None:
            return
        self._count(self._shares.pop(task_id), -1)
        self._blackout.discard(task_id)

    def _share(self, task: Task, level: str, cause: str | None) -> _Share:
        group = self.group_of(task) if self.group_of is not None else None
        interval = task.current_interval
        micro = None
        if task.schedule_kind is ScheduleKind.ADAPTIVE and interval is not None:
            micro = interval // _MICROSECOND
        return (task.type, level, group, cause, micro)

    def _count(self, share: _Share, sign: int) -> None:
        name, level, group, cause, micro = share
        self._types.setdefault(name, dict.fromkeys(LEVELS, 0))[level] += sign
        if group is None:
            return
        self._groups.setdefault(group, dict.fromkeys(LEVELS, 0))[level] += sign
        if cause is not None:
            per_group = self._causes.setdefault(group, {})
            per_group[cause] = per_group.get(cause, 0) + sign
        if micro is not None:
            sums = self._intervals.setdefault(group, [0, 0])
            sums[0] += sign * micro
            sums[1] += sign

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
