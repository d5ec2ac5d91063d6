"""Why a ready task waits, in words (``task explain``, the console's task
page): how many ready tasks of its type come before it in the runner's own
order, how many runs wait in its queue against its limit, whether its type
is paused, and roughly when it should start at the rate its type has been
dispatched over the last hour."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..domain.model import Task, TaskStatus, TaskType
from ..policy.times import fmt_duration, fmt_instant, to_utc
from ..store import SchedulerStore
from ..store.values import ENDED_WINDOW

#: ready tasks read to find the task's place (beyond: "more than")
AHEAD_SCAN = 10_000


@dataclass(frozen=True)
class Wait:
    """Where a ready waiting task stands in its type's line."""

    #: ready tasks of its type before it in dispatch order (``None``: more
    #: than :data:`AHEAD_SCAN`)
    ahead: int | None
    #: runs of its type dispatched and not started (in the broker)
    queued: int
    #: its type's ``max_queue_length`` (``None``: no limit)
    limit: int | None
    paused: bool
    #: runs of its type dispatched within the last hour
    dispatched: int
    #: roughly when it should start at that rate (``None``: no rate)
    expected_start: datetime | None
    now: datetime

    @property
    def full(self) -> bool:
        return self.limit is not None and self.queued >= self.limit

    def detail(self) -> str:
        if self.paused:
            return "its type is paused: nothing of it is dispatched until it is resumed"
        ahead = f"more than {AHEAD_SCAN:,}" if self.ahead is None else f"{self.ahead:,}"
        parts = [f"{ahead} ready task(s) of its type come before it in dispatch order"]
        queue = f"{self.queued:,} run(s) of its type wait in the broker"
        if self.limit is not None:
            queue += (
                f", at its limit of {self.limit:,} (the runner dispatches more as they start)"
                if self.full
                else f" (limit {self.limit:,}: room for {self.limit - self.queued:,})"
            )
        parts.append(queue)
        hour = fmt_duration(ENDED_WINDOW)
        if self.expected_start is None:
            parts.append(
                f"none was dispatched within the last {hour} (no runner, or its queue never "
                "drains: no worker takes them)"
            )
        else:
            parts.append(
                f"{self.dispatched:,} were dispatched within the last {hour}: at that rate it "
                f"should start in about {fmt_duration(self.expected_start - self.now)} "
                f"(around {fmt_instant(self.expected_start)})"
            )
        return "; ".join(parts) + "."

    def to_dict(self) -> dict[str, Any]:
        return {
            "ahead": self.ahead,
            "queued": self.queued,
            "max_queue_length": self.limit,
            "queue_full": self.full,
            "paused": self.paused,
            "dispatched_last_hour": self.dispatched,
            "expected_start": None
            if self.expected_start is None
            else self.expected_start.isoformat(),
            "detail": self.detail(),
        }


def why_it_waits(
    store: SchedulerStore, task: Task, task_type: TaskType, now: datetime
) -> Wait | None:
    """Where ``task`` stands at ``now`` when it is waiting and due
    (``None`` otherwise: it is not in line)."""
    now = to_utc(now)
    if task.status is not TaskStatus.WAITING or to_utc(task.next_run) > now:
        return None
    figures = store.schedule_health(now=now, counts=False, runs=True)
    queued = figures.queued.get(task.type, (0, now))[0]
    dispatched = figures.dispatched.get(task.type, 0)
    ids = store.ready_task_ids(task.type, now=now, limit=AHEAD_SCAN)
    ahead = ids.index(task.id) if task.id in ids else None
    expected = None
    if dispatched:
        # the line before it (the queue, then the ready tasks ahead) at the
        # hour's pace
        before = queued + (AHEAD_SCAN if ahead is None else ahead) + 1
        expected = now + ENDED_WINDOW * before / dispatched
        expected -= timedelta(microseconds=expected.microsecond)
    return Wait(
        ahead=ahead,
        queued=queued,
        limit=task_type.max_queue_length,
        paused=task_type.paused_at is not None,
        dispatched=dispatched,
        expected_start=expected,
        now=now,
    )
