"""Retries after failed runs: delays, the position in a retry cycle, the budget.

Retry ``n`` (1-based) waits ``min(retry_delay * retry_growth**(n-1), retry_cap)``
plus a uniform jitter in ``[0, retry_jitter]`` after the failed run ended. The
task type's defaults give 5 min, 1 h, 4 h, 4 h, ...

``num_retries`` (``R``, None meaning 0) bounds a *cycle* of consecutive
failures. The position in the cycle is derived from ``failure_count`` alone,
so it needs no extra stored state:

* one-shot task: failures 1..R are followed by retries 1..R; failure R+1
  exhausts the retries (the task is then disabled);
* recurring task: failures repeat in cycles of R+1: within a cycle, failures
  1..R are followed by retries, and failure R+1 exhausts them, sending the task
  back to its normal schedule; the next failure starts a new cycle at retry 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, runtime_checkable

from ..domain.exceptions import InvalidInput
from ..domain.model import ScheduleKind, Task, TaskType
from .cron import shortest_cron_gap
from .times import ZERO, fmt_duration, reference_start


@runtime_checkable
class SupportsRandom(Protocol):
    """Anything with ``random() -> float`` in ``[0, 1)``, such as ``random.Random``."""

    def random(self) -> float: ...


RandomSource = SupportsRandom | Callable[[], float]


def draw(rng: RandomSource) -> float:
    """A number in ``[0, 1]`` from ``rng`` (a Random-like object or a callable)."""
    value = rng.random() if isinstance(rng, SupportsRandom) else rng()
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        raise ValueError(f"random source returned {value!r}, expected a number in [0, 1]")
    return value


def num_retries(task_type: TaskType) -> int:
    """The type's retry count, None meaning no retries."""
    return task_type.num_retries or 0


def retry_base_delay(task_type: TaskType, n: int) -> timedelta:
    """The delay before retry ``n`` without jitter: ``min(delay * growth**(n-1), cap)``."""
    if n < 1:
        raise ValueError(f"retry numbers start at 1, got {n}")
    delay = task_type.retry_delay.total_seconds()
    cap = task_type.retry_cap.total_seconds()
    try:
        grown = delay * math.pow(task_type.retry_growth, n - 1)
    except OverflowError:
        grown = math.inf
    return timedelta(seconds=min(grown, cap))


def retry_delay(task_type: TaskType, n: int, jitter_fraction: float = 0.0) -> timedelta:
    """The delay before retry ``n``: base delay plus ``jitter_fraction * retry_jitter``."""
    if not 0.0 <= jitter_fraction <= 1.0:
        raise ValueError(f"jitter_fraction {jitter_fraction!r} is not in [0, 1]")
    return retry_base_delay(task_type, n) + task_type.retry_jitter * jitter_fraction


def worst_case_retry_sum(task_type: TaskType) -> timedelta:
    """Sum of every retry's longest wait: ``sum(base(n) + jitter for n in 1..R)``."""
    total = ZERO
    for n in range(1, num_retries(task_type) + 1):
        total += retry_base_delay(task_type, n) + task_type.retry_jitter
    return total


@dataclass(frozen=True)
class RetryState:
    """Where a task stands after its last failures.

    ``retry`` is the number (1-based) of the retry now awaited, or None;
    ``exhausted`` is true when the last failure used up the retries.
    """

    retry: int | None
    exhausted: bool
    retries_left: int


def retry_state(task: Task, task_type: TaskType) -> RetryState:
    """The retry position implied by ``failure_count`` (see the module doc)."""
    budget = num_retries(task_type)
    failures = task.failure_count
    if failures <= 0:
        return RetryState(retry=None, exhausted=False, retries_left=budget)
    if task.schedule_kind is ScheduleKind.ONESHOT:
        if failures <= budget:
            return RetryState(retry=failures, exhausted=False, retries_left=budget - failures)
        return RetryState(retry=None, exhausted=True, retries_left=0)
    position = (failures - 1) % (budget + 1) + 1
    if position <= budget:
        return RetryState(retry=position, exhausted=False, retries_left=budget - position)
    return RetryState(retry=None, exhausted=True, retries_left=budget)


def budget_period(task: Task, task_type: TaskType) -> tuple[str, timedelta] | None:
    """The field and length a recurring task's retries must fit in (None for one-shots).

    periodic: ``period``; adaptive: the type's ``min_interval`` when set (the
    interval may shrink to it: the field is then ``min_interval``, a setting
    of the type, whatever interval the task was given), else the task's
    ``current_interval``; cron: the
    shortest gap between consecutive firings over the next year, DST
    changes included (:func:`.cron.shortest_cron_gap`).
    """
    kind = task.schedule_kind
    if kind is ScheduleKind.PERIODIC and task.period is not None:
        return "period", task.period
    if kind is ScheduleKind.ADAPTIVE:
        if task_type.min_interval is not None:
            return "min_interval", task_type.min_interval
        interval = task.current_interval or task_type.default_interval
        return ("current_interval", interval) if interval is not None else None
    if kind is ScheduleKind.CRON and task.cron is not None:
        return "cron", shortest_cron_gap(task.cron, task.tz, reference_start(task))
    return None


def check_retry_budget(task: Task, task_type: TaskType) -> None:
    """Refuse a recurring task whose worst-case retry time is longer than its period.

    Raises InvalidInput naming the schedule field (``period``, ``cron`` or
    ``current_interval``), or the type's ``min_interval`` when that is the
    bound (no adaptive task of the type can then be made); the message gives
    both durations.
    """
    found = budget_period(task, task_type)
    if found is None or num_retries(task_type) == 0:
        return
    name, period = found
    worst = worst_case_retry_sum(task_type)
    if worst <= period:
        return
    waits = " + ".join(
        fmt_duration(retry_base_delay(task_type, n)) for n in range(1, num_retries(task_type) + 1)
    )
    jitter = task_type.retry_jitter
    jitter_note = f", each plus up to {fmt_duration(jitter)} of jitter" if jitter > ZERO else ""
    if name == "min_interval":
        raise InvalidInput(
            name,
            f"task type {task_type.type!r} cannot take adaptive tasks, whatever their interval: "
            f"its min_interval ({fmt_duration(period)}, the shortest an interval may become) "
            f"is shorter than its worst-case retry time {fmt_duration(worst)} "
            f"(num_retries={num_retries(task_type)}: {waits}{jitter_note}). Fix the type: "
            f"a longer --min-interval, or fewer or shorter retries "
            f"(swh scheduler task-type update {task_type.type} ...)",
        )
    what = {
        "period": "period",
        "cron": "shortest gap between two cron firings",
        "current_interval": "interval",
    }[name]
    raise InvalidInput(
        name,
        f"the task's {what} ({fmt_duration(period)}) is shorter than the worst-case retry "
        f"time of task type {task_type.type!r}: {fmt_duration(worst)} "
        f"(num_retries={num_retries(task_type)}: {waits}{jitter_note}); retries would run "
        "into the next period. Use a longer period or a task type with fewer or shorter retries",
    )
