"""The conditions of a store's tasks: how many are OK, WARNING or in ERROR
per type, and which ones are not OK (``swh scheduler task status``,
``GET /conditions``).

Completed and cancelled tasks are OK by definition and only pile up: the
summary reads the live and the disabled ones (a task that gave up after its
retries is disabled, and in ERROR), a page of ids at a time."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import policy
from .exceptions import UnknownTaskType
from .model import Task, TaskStatus
from .store import SchedulerStore, TaskFilter

#: the statuses whose tasks the summary reads
WATCHED = (TaskStatus.WAITING, TaskStatus.SCHEDULED, TaskStatus.DISABLED)
LEVELS = ("OK", "WARNING", "ERROR")
#: tasks read per query
PAGE = 1000


@dataclass(frozen=True)
class ConditionSummary:
    """Counts per type and level, and up to ``limit`` tasks at the levels asked."""

    now: datetime
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    tasks: list[tuple[Task, policy.ConditionReport]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "now": self.now.isoformat(),
            "counts": self.counts,
            "tasks": [{"id": t.id, "type": t.type, **r.to_dict()} for t, r in self.tasks],
        }


def summarise(
    store: SchedulerStore,
    now: datetime,
    *,
    task_type: str | None = None,
    show: str | None = None,
    limit: int = 20,
) -> ConditionSummary:
    """The conditions at ``now`` of the tasks of ``task_type`` (default: all
    types), listing up to ``limit`` tasks at level ``show`` (``"ERROR"``) or
    worse (``"WARNING"``: warnings and errors); ``show=None`` lists none."""
    if show is not None and show not in ("ERROR", "WARNING"):
        raise ValueError(f"show must be ERROR or WARNING, not {show!r}")
    types = {t.type: t for t in store.get_task_types()}
    if task_type is not None and task_type not in types:
        raise UnknownTaskType(task_type)
    wanted = {"ERROR"} if show == "ERROR" else {"ERROR", "WARNING"}
    summary = ConditionSummary(now)
    criteria = TaskFilter(type=task_type, status=WATCHED)
    after = 0
    while page := store.search_tasks(criteria, after_id=after, limit=PAGE):
        after = page[-1].id or 0
        for item in page:
            report = policy.condition(item, types[item.type], now)
            per_type = summary.counts.setdefault(item.type, dict.fromkeys(LEVELS, 0))
            per_type[report.level.value] += 1
            if show and report.level.value in wanted and len(summary.tasks) < limit:
                summary.tasks.append((item, report))
    return summary


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
