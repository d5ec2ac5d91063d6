"""The condition of a task: OK, WARNING or ERROR, with a reason code.

Checks run in this order; the first that applies gives the result.

Status first:

* ``cancelled`` (OK) — a client cancelled the task; nothing is promised any more.
* ``completed`` (OK) — a one-shot task ran successfully.
* ``gave_up`` (ERROR) — disabled after failures (retries exhausted or a
  permanent failure): its work is not being done.
* ``disabled`` (WARNING) — taken out of scheduling while not failing (by an operator).

Then, for live tasks (``finish_by`` is defined in :mod:`.schedule`):

* ``running_too_long`` (ERROR) — the current run has gone on longer than
  ``max_allowed_duration`` (task's, else its type's).
* ``late`` (ERROR) — one-shot or cron: now is past ``finish_by`` and the run
  for that instant or firing has not finished.
* ``stale`` (ERROR) — periodic or adaptive: now is past ``finish_by``
  (``now - ref > period``; ``now > can_start_by + interval``).
* ``never_run`` (ERROR) — as ``late``/``stale`` for a recurring task that has
  never completed a good run (its detail says when every run so far failed:
  "The task never ran successfully: the last 36 runs failed ...").

The detail of ``late`` and ``stale`` also says how many runs failed since
the last good one, when some did.
* ``cooldown_too_long`` (WARNING) — periodic: not yet stale, but its
  cooldown and its run time make every run start late, by construction
  (:mod:`.cooldown`: its run time plus its cooldown is longer than its
  period less its average duration); the detail names the numbers.
* ``likely_late`` (WARNING) — not yet late, but the expected end is past
  ``finish_by``: for a running task ``owner_started_at + avg``; for an idle
  one ``max(now, can_start_by) + avg`` (it cannot start before can_start_by).
* ``overran_expected_duration`` (WARNING) — the current run, or the last run
  when it succeeded, lasted longer than ``max_expected_duration``.
* ``last_run_failed`` (WARNING) — the last run failed (``failure_count > 0``).
* ``first_run_pending`` (OK) — a recurring task that has not succeeded yet
  but is within its first promise.
* ``ok`` (OK) — everything else.

``avg`` is the effective average duration (operator override, else EWMA, else 0).

A waiting task of a paused type (``task_type.paused_at``): its detail ends
by saying since when its type has been paused, the reason it is not
dispatched; and

* ``paused`` (WARNING) — instead of ``late``, ``stale`` or ``never_run``
  when the promise was broken while the type was paused (``finish_by`` at or
  after ``paused_at``): an operator stopped the work, as for ``disabled``.
  A promise broken before the pause stays ERROR.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from ..domain.model import ScheduleKind, Task, TaskStatus, TaskType
from ..domain.text import plural
from .cooldown import cooldown_shortfall
from .schedule import StartTimes, start_times
from .times import (
    effective_average,
    fmt_duration,
    fmt_local,
    max_allowed_duration,
    max_expected_duration,
    to_utc,
)


class Condition(StrEnum):
    OK = "OK"
    WARNING = "WARNING"
    ERROR = "ERROR"


class Reason(StrEnum):
    OK = "ok"
    FIRST_RUN_PENDING = "first_run_pending"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    DISABLED = "disabled"
    GAVE_UP = "gave_up"
    RUNNING_TOO_LONG = "running_too_long"
    LATE = "late"
    STALE = "stale"
    NEVER_RUN = "never_run"
    LIKELY_LATE = "likely_late"
    COOLDOWN_TOO_LONG = "cooldown_too_long"
    OVERRAN_EXPECTED_DURATION = "overran_expected_duration"
    LAST_RUN_FAILED = "last_run_failed"
    PAUSED = "paused"


#: The level each reason is reported with.
REASON_LEVEL: dict[Reason, Condition] = {
    Reason.OK: Condition.OK,
    Reason.FIRST_RUN_PENDING: Condition.OK,
    Reason.COMPLETED: Condition.OK,
    Reason.CANCELLED: Condition.OK,
    Reason.DISABLED: Condition.WARNING,
    Reason.GAVE_UP: Condition.ERROR,
    Reason.RUNNING_TOO_LONG: Condition.ERROR,
    Reason.LATE: Condition.ERROR,
    Reason.STALE: Condition.ERROR,
    Reason.NEVER_RUN: Condition.ERROR,
    Reason.LIKELY_LATE: Condition.WARNING,
    Reason.COOLDOWN_TOO_LONG: Condition.WARNING,
    Reason.OVERRAN_EXPECTED_DURATION: Condition.WARNING,
    Reason.LAST_RUN_FAILED: Condition.WARNING,
    Reason.PAUSED: Condition.WARNING,
}


@dataclass(frozen=True)
class ConditionReport:
    """A task's condition: ``level``, a ``reason`` code and a ``detail`` sentence."""

    level: Condition
    reason: Reason
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"level": str(self.level), "reason": str(self.reason), "detail": self.detail}


def _report(reason: Reason, detail: str) -> ConditionReport:
    return ConditionReport(REASON_LEVEL[reason], reason, detail)


def _status_report(task: Task) -> ConditionReport | None:
    if task.status is TaskStatus.CANCELLED:
        return _report(Reason.CANCELLED, "The task was cancelled; it will not run again.")
    if task.status is TaskStatus.COMPLETED:
        return _report(Reason.COMPLETED, "The one-shot task ran successfully.")
    if task.status is TaskStatus.DISABLED:
        if task.failure_count > 0:
            return _report(
                Reason.GAVE_UP,
                f"The task was disabled after {plural(task.failure_count, 'consecutive failure')} "
                "(retries exhausted or permanent failure); its work is not being done.",
            )
        return _report(
            Reason.DISABLED, "The task is disabled: it is not dispatched until it is enabled."
        )
    return None


def _last_failed(count: int) -> str:
    return "The last run failed" if count == 1 else f"The last {count} runs failed"


def _last_end(task: Task, when: Callable[[datetime], str]) -> str:
    """`` (the latest ended at T)`` when the task tells."""
    if task.last_end_at is None:
        return ""
    latest = "it" if task.failure_count == 1 else "the latest"
    return f" ({latest} ended at {when(task.last_end_at)})"


def _attempts_failed(task: Task) -> str:
    if task.failure_count <= 0:
        return ""
    return f" {_last_failed(task.failure_count)}."


def _failed_since(task: Task) -> str:
    """What a late or stale task's failures add: the runs since its last
    good one failed (its work is being tried, and failing)."""
    if task.failure_count <= 0:
        return ""
    runs = "run" if task.failure_count == 1 else f"{task.failure_count} runs"
    return f" The {runs} since the last good one failed."


def condition(
    task: Task, task_type: TaskType, now: datetime, *, times: StartTimes | None = None
) -> ConditionReport:
    """The condition of ``task`` at ``now`` (rules in the module doc).

    ``times`` may be passed when already computed by :func:`start_times`.
    """
    paused_at = task_type.paused_at
    if paused_at is None or task.status is not TaskStatus.WAITING:
        return _condition(task, task_type, now, times)
    times = times or start_times(task, task_type, to_utc(now))
    report = _condition(task, task_type, now, times)
    since = fmt_local(to_utc(paused_at), task.tz, seconds=True)
    if (
        report.reason in _BROKEN_PROMISE
        and times.finish_by is not None
        and times.finish_by >= to_utc(paused_at)
    ):
        return _report(
            Reason.PAUSED,
            f"Its type has been paused since {since}: nothing of it is dispatched until "
            f"`task-type resume {task_type.type}`. Meanwhile: {report.detail}",
        )
    return replace(report, detail=f"{report.detail} Its type has been paused since {since}.")


#: the reasons that become ``paused`` when the promise was broken during a pause
_BROKEN_PROMISE = frozenset({Reason.LATE, Reason.STALE, Reason.NEVER_RUN})


def _condition(
    task: Task, task_type: TaskType, now: datetime, times: StartTimes | None
) -> ConditionReport:
    now = to_utc(now)
    by_status = _status_report(task)
    if by_status is not None:
        return by_status
    times = times or start_times(task, task_type, now)
    assert times.finish_by is not None
    finish_by = times.finish_by
    avg = effective_average(task)

    def when(instant: datetime) -> str:  # in the task's own zone, with its offset
        return fmt_local(instant, task.tz, seconds=True)

    started = to_utc(task.owner_started_at) if task.owner_started_at is not None else None
    kind = task.schedule_kind

    allowed = max_allowed_duration(task, task_type)
    if started is not None and allowed is not None and now - started > allowed:
        return _report(
            Reason.RUNNING_TOO_LONG,
            f"The current run started at {when(started)} and has run for "
            f"{fmt_duration(now - started)}, longer than the {fmt_duration(allowed)} allowed.",
        )

    if now > finish_by:
        overdue = fmt_duration(now - finish_by)
        if kind is ScheduleKind.ONESHOT:
            return _report(
                Reason.LATE,
                f"The one-shot task was due to be done by {when(finish_by)} and is {overdue} late."
                f"{_attempts_failed(task)}",
            )
        if task.last_good_start_at is None and task.failure_count > 0:
            return _report(
                Reason.NEVER_RUN,
                f"The task never ran successfully: {_last_failed(task.failure_count).lower()}"
                f"{_last_end(task, when)}; its first promise ({when(finish_by)}) was "
                f"broken {overdue} ago.",
            )
        if task.last_good_start_at is None:
            return _report(
                Reason.NEVER_RUN,
                f"The task has never completed a good run and its first promise "
                f"({when(finish_by)}) was broken {overdue} ago.",
            )
        if kind is ScheduleKind.CRON:
            return _report(
                Reason.LATE,
                f"The firing at {when(times.normal_can_start_by or finish_by)} should "
                f"have finished by {when(finish_by)}; it is {overdue} late."
                f"{_failed_since(task)}",
            )
        return _report(
            Reason.STALE,
            f"The last good run started at {when(task.last_good_start_at)}; fresh "
            f"data was promised until {when(finish_by)}, {overdue} ago.{_failed_since(task)}",
        )

    shortfall = cooldown_shortfall(task) if kind is ScheduleKind.PERIODIC else None
    if shortfall is not None:
        return _report(Reason.COOLDOWN_TOO_LONG, shortfall.detail())

    if started is not None:
        expected_end = started + avg
        if expected_end > finish_by:
            return _report(
                Reason.LIKELY_LATE,
                f"The current run started at {when(started)} and, taking "
                f"{fmt_duration(avg)} on average, should end at {when(expected_end)}, "
                f"{fmt_duration(expected_end - finish_by)} after it should be done "
                f"({when(finish_by)}).",
            )
    else:
        earliest = max(now, times.can_start_by)
        if earliest + avg > finish_by and not avg:
            return _report(
                Reason.LIKELY_LATE,
                f"It cannot start before {when(earliest)}, "
                f"{fmt_duration(earliest - finish_by)} after it should be done "
                f"({when(finish_by)}).",
            )
        if earliest + avg > finish_by:
            return _report(
                Reason.LIKELY_LATE,
                f"Started at {when(earliest)} at the earliest, a run taking "
                f"{fmt_duration(avg)} on average would end at {when(earliest + avg)}, "
                f"{fmt_duration(earliest + avg - finish_by)} after it should be done "
                f"({when(finish_by)}).",
            )

    expected = max_expected_duration(task, task_type)
    if expected is not None:
        if started is not None and now - started > expected:
            return _report(
                Reason.OVERRAN_EXPECTED_DURATION,
                f"The current run has lasted {fmt_duration(now - started)}, longer than the "
                f"{fmt_duration(expected)} expected.",
            )
        good_start, good_end = task.last_good_start_at, task.last_good_end_at
        if (
            started is None
            and task.failure_count == 0
            and good_start is not None
            and good_end is not None
            and good_end - good_start > expected
        ):
            return _report(
                Reason.OVERRAN_EXPECTED_DURATION,
                f"The last run lasted {fmt_duration(good_end - good_start)}, longer than the "
                f"{fmt_duration(expected)} expected.",
            )

    if task.failure_count > 0:
        return _report(
            Reason.LAST_RUN_FAILED,
            f"{_last_failed(task.failure_count)}; next attempt from {when(times.can_start_by)}.",
        )
    if task.last_good_start_at is None and kind is not ScheduleKind.ONESHOT:
        if task.status is TaskStatus.SCHEDULED:  # not waiting: its run is out
            return _report(
                Reason.FIRST_RUN_PENDING,
                "The task has not completed a run yet; its first run was dispatched and has "
                "not ended.",
            )
        return _report(
            Reason.FIRST_RUN_PENDING,
            f"The task has not run yet; it may start from {when(times.can_start_by)}.",
        )
    return _report(Reason.OK, "The task is running as promised.")


def level_holds_until(
    task: Task, task_type: TaskType, now: datetime, *, times: StartTimes | None = None
) -> datetime | None:
    """The last instant up to which the level of ``condition(task,
    task_type, t)`` stays what it is at ``now``, for every ``t`` between,
    as long as the task itself does not change; ``None``: for as long as it
    does not change. Lets a caller that watches many tasks over time (the
    simulator) compute a task's condition again only when it may differ.

    The level moves with time only where a rule compares ``now`` with an
    instant: the finish-by bound (ERROR after it), the time limit and the
    expected duration of a running run, and the last start that can end in
    time (``finish_by - average``, WARNING after it). A task with blackout
    windows is answered ``now``: its start times themselves depend on it."""
    now = to_utc(now)
    if _status_report(task) is not None:
        return None
    if task.blackout_periods:
        return now
    times = times or start_times(task, task_type, now)
    assert times.finish_by is not None
    finish_by = times.finish_by
    started = to_utc(task.owner_started_at) if task.owner_started_at is not None else None
    allowed = max_allowed_duration(task, task_type)
    if now > finish_by or (started is not None and allowed is not None and now - started > allowed):
        return None  # ERROR until the task changes
    limits = [finish_by]
    if started is None:
        limits.append(finish_by - effective_average(task))
    else:
        expected = max_expected_duration(task, task_type)
        limits += [started + d for d in (allowed, expected) if d is not None]
    return min(t for t in limits if t >= now)  # finish_by is one
