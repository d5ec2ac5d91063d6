"""The conditions of a store's tasks: how many are OK, WARNING or in ERROR
per type, and which ones are not OK (``swh scheduler task status``,
``GET /conditions``).

Completed and cancelled tasks are OK by definition and only pile up: the
summary reads the live and the disabled ones (a task that gave up after its
retries is disabled, and in ERROR), a page of ids at a time."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import policy
from ..domain.exceptions import UnknownTaskType
from ..domain.jsonable import hidden_kwargs
from ..domain.model import ScheduleKind, Task, TaskRun, TaskStatus
from ..domain.records import WorkerState
from ..policy.blind import holders
from ..store import SchedulerStore, TaskFilter

#: the statuses whose tasks the summary reads
WATCHED = (TaskStatus.WAITING, TaskStatus.SCHEDULED, TaskStatus.DISABLED)
LEVELS = ("OK", "WARNING", "ERROR")
#: tasks read per query
PAGE = 1000


@dataclass(frozen=True)
class Listed:
    """A task ``summarise`` lists: its condition, and how late it is."""

    task: Task
    report: policy.ConditionReport
    #: seconds past its finish-by (negative: time left); ``None``: no such
    #: time (a disabled task)
    late: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.task.id,
            "type": self.task.type,
            **self.report.to_dict(),
            "late_seconds": self.late,
        }


@dataclass(frozen=True)
class ConditionSummary:
    """Counts per type and level, and up to ``limit`` tasks at the level
    asked, the most late first; ``matched``: how many tasks were at it."""

    now: datetime
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    tasks: list[Listed] = field(default_factory=list)
    matched: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "now": self.now.isoformat(),
            "counts": self.counts,
            "tasks": [t.to_dict() for t in self.tasks],
            "matched": self.matched,
            "more": self.matched - len(self.tasks),
        }


def assess(
    task: Task, task_type: Any, now: datetime
) -> tuple[policy.ConditionReport, float | None]:
    """A task's condition at ``now`` and how late it is: seconds past its
    finish-by (``None`` for a task that has none: disabled, finished)."""
    times = None
    if task.status in (TaskStatus.WAITING, TaskStatus.SCHEDULED):
        times = policy.start_times(task, task_type, now)
    report = policy.condition(task, task_type, now, times=times)
    late = None
    if times is not None and times.finish_by is not None:
        late = (now - times.finish_by).total_seconds()
    return report, late


def last_failure(store: SchedulerStore, task_id: int) -> TaskRun | None:
    """The task's latest failed run (failed, permfailed, timed out: what
    counts as a failure), read through that task's runs only."""
    found = store.get_task_runs(task_id, limit=1, statuses=sorted(policy.FAILED_STATUSES))
    return found[0] if found else None


def latest_run(store: SchedulerStore, task_id: int) -> tuple[TaskRun | None, WorkerState | None]:
    """The task's latest run, and its worker's row while the run is open."""
    found = store.get_task_runs(task_id, limit=1)
    run = found[0] if found else None
    worker = None
    if run is not None and run.worker and run.status.is_open:
        worker = next((w for w in store.get_workers() if w.hostname == run.worker), None)
    return run, worker


def latest_run_state(
    store: SchedulerStore,
    task: Task,
    now: datetime,
    *,
    queue: str | None = None,
    backend: str | None = None,
) -> policy.RunState | None:
    """:func:`policy.run_state` of ``task``'s latest run (for ``explain``);
    ``backend``, the Celery task its type runs, names the workers without
    task events that may hold a run never seen to start."""
    run, worker = latest_run(store, task.id or 0)
    holding: list[WorkerState] = []
    if run is not None and run.status.is_open and run.started is None and backend:
        holding = holders(store.get_workers(), backend, run.scheduled)
    return policy.run_state(task, run, now, worker=worker, queue=queue, holders=holding)


def unchanged_reason(store: SchedulerStore, action: str, task_id: int, now: datetime) -> str:
    """Why ``action`` (respawn, enable, disable, cancel, run-now) changed
    nothing on task ``task_id`` (:func:`policy.why_unchanged`), read now."""
    found = store.get_tasks([task_id])
    if not found:
        return f"unchanged: there is no task {task_id} (any more)"
    run, worker = latest_run(store, task_id)
    return policy.why_unchanged(action, found[0], run, now, worker=worker)


def _lateness_order(entry: Listed) -> tuple[int, int, float, int]:
    """Worst level first, then the most late (a task without a finish-by
    last), then by id."""
    rank = LEVELS[::-1].index(entry.report.level.value)
    if entry.late is None:
        return rank, 1, 0.0, entry.task.id or 0
    return rank, 0, -entry.late, entry.task.id or 0


def summarise(
    store: SchedulerStore,
    now: datetime,
    *,
    task_type: str | None = None,
    kind: ScheduleKind | None = None,
    key_prefix: str | None = None,
    show: str | None = None,
    limit: int = 20,
    at_least: bool = False,
) -> ConditionSummary:
    """The conditions at ``now`` of the tasks of ``task_type`` (default: all
    types; and of schedule ``kind``, with keys starting ``key_prefix``, when
    given), listing up to ``limit`` tasks at level ``show`` (with
    ``at_least``: at that level or worse, the worst first), the most late
    first; ``show=None`` lists none.

    Reads every watched task once, a page of :data:`PAGE` ids at a time,
    and keeps at most ``2 * limit + PAGE`` candidates in memory: the counts
    and ``matched`` are exact whatever the table holds."""
    if show is not None and show not in LEVELS:
        raise ValueError(f"show must be one of {', '.join(LEVELS)}, not {show!r}")
    types = {t.type: t for t in store.get_task_types()}
    if task_type is not None and task_type not in types:
        raise UnknownTaskType(task_type)
    wanted = set()
    if show is not None:
        wanted = set(LEVELS[LEVELS.index(show) :]) if at_least else {show}
    counts: dict[str, dict[str, int]] = {}
    kept: list[Listed] = []
    matched = 0
    criteria = TaskFilter(type=task_type, status=WATCHED, schedule_kind=kind, key_prefix=key_prefix)
    after = 0
    while page := store.search_tasks(criteria, after_id=after, limit=PAGE):
        after = page[-1].id or 0
        for item in page:
            report, late = assess(item, types[item.type], now)
            per_type = counts.setdefault(item.type, dict.fromkeys(LEVELS, 0))
            per_type[report.level.value] += 1
            if report.level.value in wanted:
                matched += 1
                kept.append(Listed(item, report, late))
        if len(kept) > 2 * limit:  # bounded memory: keep the worst
            kept.sort(key=_lateness_order)
            del kept[limit:]
    kept.sort(key=_lateness_order)
    return ConditionSummary(now, counts, kept[:limit], matched)


def listing(
    store: SchedulerStore,
    now: datetime,
    *,
    show: str,
    task_type: str | None = None,
    limit: int = 20,
    after_id: int = 0,
    scan: int = 5000,
) -> tuple[list[tuple[Task, policy.ConditionReport]], int | None]:
    """Up to ``limit`` tasks at level ``show`` or worse among the watched
    tasks with ids after ``after_id``, reading at most ``scan`` of them (a
    bounded cost per call, whatever the table holds). Also returns the id to
    continue after (``None``: the end of the table was reached)."""
    if show not in ("ERROR", "WARNING"):
        raise ValueError(f"show must be ERROR or WARNING, not {show!r}")
    types = {t.type: t for t in store.get_task_types()}
    if task_type is not None and task_type not in types:
        raise UnknownTaskType(task_type)
    wanted = {"ERROR"} if show == "ERROR" else {"ERROR", "WARNING"}
    criteria = TaskFilter(type=task_type, status=WATCHED)
    found: list[tuple[Task, policy.ConditionReport]] = []
    read, after = 0, after_id
    while read < scan:
        page = store.search_tasks(criteria, after_id=after, limit=min(PAGE, scan - read))
        if not page:
            return found, None
        for item in page:
            read += 1
            after = item.id or 0
            report = policy.condition(item, types[item.type], now)
            if report.level.value in wanted:
                found.append((item, report))
                if len(found) >= limit:
                    return found, after
    return found, after


@dataclass(frozen=True)
class Problem:
    """A task that is not OK, as a census saw it: what the console's
    problem list filters and orders without reading the task again."""

    id: int
    type: str
    level: str
    #: seconds past the time its work should have been done by (its
    #: finish-by); ``None``: no such time (a disabled task)
    late: float | None
    kind: str
    priority: str
    #: lower-case key and arguments, for a free-text filter (shortened)
    text: str

    def order(self) -> tuple[int, float, int]:
        """Worst first: ERROR before WARNING, then the latest, then by id."""
        rank = 0 if self.level == "ERROR" else 1
        return rank, -(self.late if self.late is not None else float("-inf")), self.id


@dataclass(frozen=True)
class Census:
    """Every watched task's condition at ``now``: counts per type and level,
    and the tasks that are not OK, worst first (at most ``kept``)."""

    now: datetime
    counts: dict[str, dict[str, int]]
    problems: tuple[Problem, ...]
    #: how many tasks were not OK in all (more than ``len(problems)`` when
    #: the census kept only the worst)
    not_ok: int


#: characters of a task's key and arguments kept for the free-text filter
TEXT_KEPT = 160


def problem_text(task: Task) -> str:
    # secrets hidden: a filter on them would let a reader guess them
    plain = {"args": list(task.args), "kwargs": hidden_kwargs(task.kwargs)}
    arguments = json.dumps(plain, default=str, ensure_ascii=False)
    return f"{task.key or ''} {arguments}"[:TEXT_KEPT].lower()


def problem_of(task: Task, task_type: Any, now: datetime) -> tuple[Problem, policy.ConditionReport]:
    """A task's condition at ``now`` and its problem entry (also for an OK task)."""
    report, late = assess(task, task_type, now)
    entry = Problem(
        id=task.id or 0,
        type=task.type,
        level=report.level.value,
        late=late,
        kind=str(task.schedule_kind),
        priority=str(task.priority),
        # only a problem is searched: an OK task's text is never made
        text="" if report.level.value == "OK" else problem_text(task),
    )
    return entry, report


def census(store: SchedulerStore, now: datetime, *, keep: int = 200_000) -> Census:
    """The conditions at ``now`` of every watched task, reading a page of
    ids at a time; keeps the ``keep`` worst problems."""
    types = {t.type: t for t in store.get_task_types()}
    counts: dict[str, dict[str, int]] = {}
    problems: list[Problem] = []
    not_ok = 0
    criteria = TaskFilter(status=WATCHED)
    after = 0
    while page := store.search_tasks(criteria, after_id=after, limit=PAGE):
        after = page[-1].id or 0
        for item in page:
            entry, _ = problem_of(item, types[item.type], now)
            per_type = counts.setdefault(item.type, dict.fromkeys(LEVELS, 0))
            per_type[entry.level] += 1
            if entry.level != "OK":
                not_ok += 1
                problems.append(entry)
        if len(problems) > 2 * keep:  # bounded memory: keep the worst
            problems.sort(key=Problem.order)
            del problems[keep:]
    problems.sort(key=Problem.order)
    return Census(now, counts, tuple(problems[:keep]), not_ok)
