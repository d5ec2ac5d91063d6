"""can_start_by / should_start_by of a task (DESIGN.md §3), and what moved them.

First the *normal* times of the schedule kind are computed from the last good
run (``ref`` is the reference start, ``avg`` the effective average duration):

=========  ===============================  ==========================  ==================
kind       normal can_start_by              should_start_by             finish_by
=========  ===============================  ==========================  ==================
oneshot    T (requested instant)            T + max_delay               should + max_allowed
periodic   last_good_end_at + cooldown      ref + period - avg          ref + period
cron       next_cron_time(ref)              can + cron_max_duration     can + cron_max_duration
                                            - avg
adaptive   last_good_end_at + interval      can + interval              can + interval
=========  ===============================  ==========================  ==================

A periodic or adaptive task that never succeeded uses its first run instead
of ``last_good_end_at + ...``: the ``next_run`` the client gave while it has
never been attempted, its reference start afterwards.

``finish_by`` is the instant after which the condition is ERROR when the run
of the current period has not finished.

Then ``can_start_by`` only (``should_start_by`` never moves) is adjusted:

1. retry back-off — while awaiting retry n, to at least the failed run's end
   plus the retry delay (jitter included: see :func:`compute_start_times`);
2. retries exhausted — a recurring task whose last failure used up its
   retries waits for its next regular occurrence counted from the failed
   run's start (periodic: + period; adaptive: + interval; cron: the next
   firing after it);
3. blackout — moved past every blackout window it falls in; when it is
   already past and ``now`` lies in a window, to the end of that window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from ..domain.model import ScheduleKind, Task, TaskType
from ..domain.text import plural
from .blackout import blackout_at, blackout_end
from .cron import next_cron_time
from .retry import retry_base_delay, retry_state
from .times import (
    ZERO,
    effective_average,
    fmt_clock,
    fmt_duration,
    fmt_instant,
    fmt_local,
    max_allowed_duration,
    never_attempted,
    oneshot_instant,
    reference_start,
    to_utc,
)


class AdjustmentKind(StrEnum):
    COOLDOWN = "cooldown"
    RETRY_BACKOFF = "retry_backoff"
    RETRIES_EXHAUSTED = "retries_exhausted"
    BLACKOUT = "blackout"


@dataclass(frozen=True)
class Adjustment:
    """One rule that moved ``field`` from ``moved_from`` to ``moved_to``."""

    kind: AdjustmentKind
    moved_from: datetime
    moved_to: datetime
    detail: str
    field: str = "can_start_by"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "field": self.field,
            "from": self.moved_from.isoformat(),
            "to": self.moved_to.isoformat(),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class StartTimes:
    """When a task may start, when it should start, and why."""

    can_start_by: datetime
    should_start_by: datetime
    adjustments: tuple[Adjustment, ...] = ()
    finish_by: datetime | None = None
    reference_start: datetime | None = None
    basis: str = ""
    normal_can_start_by: datetime | None = field(default=None, compare=False)


def interval_of(task: Task, task_type: TaskType) -> timedelta:
    """An adaptive task's current interval (its type's default when unset)."""
    interval = task.current_interval or task_type.default_interval
    if interval is None:
        raise ValueError(f"adaptive task {task.id} has no interval and its type has no default")
    return interval


def _first_run(task: Task) -> datetime:
    return to_utc(task.next_run) if never_attempted(task) else reference_start(task)


def _normal_times(task: Task, task_type: TaskType) -> tuple[datetime, datetime, datetime, str]:
    """(can_start_by, should_start_by, finish_by, basis) before any adjustment,
    moved on to the firing a skip resumed at (:func:`_resumed`)."""
    can, should, finish_by, basis = _schedule_times(task, task_type)
    return _resumed(task, can, should, finish_by, basis)


def _resumed(
    task: Task, can: datetime, should: datetime, finish_by: datetime, basis: str
) -> tuple[datetime, datetime, datetime, str]:
    """The times of a recurring task whose missed firings were skipped
    (``skipped_until``, see :mod:`.catchup`): its firing (cron: can_start_by;
    periodic, adaptive: should_start_by) is never before the one the skip
    resumed at; should_start_by and finish_by move with it, can_start_by is
    never earlier. Once a run served that firing, the schedule's own times are
    later and this changes nothing."""
    resume = task.skipped_until
    if resume is None or task.schedule_kind is ScheduleKind.ONESHOT:
        return can, should, finish_by, basis
    resume = to_utc(resume)
    firing = can if task.schedule_kind is ScheduleKind.CRON else should
    if resume <= firing:
        return can, should, finish_by, basis
    shift = resume - firing
    why = f"the firing at {fmt_instant(resume)}, after missed ones were skipped (catch_up skip)"
    return max(can, resume), should + shift, finish_by + shift, why


def _schedule_times(task: Task, task_type: TaskType) -> tuple[datetime, datetime, datetime, str]:
    """(can_start_by, should_start_by, finish_by, basis) of the schedule kind."""
    avg = effective_average(task)
    ref = reference_start(task)
    kind = task.schedule_kind
    if kind is ScheduleKind.ONESHOT:
        at = oneshot_instant(task)
        should = at + (task.max_delay or ZERO)
        allowed = max_allowed_duration(task, task_type) or ZERO
        return at, should, should + allowed, "requested instant"
    if kind is ScheduleKind.PERIODIC:
        assert task.period is not None
        if task.last_good_end_at is not None:
            can = to_utc(task.last_good_end_at)
            basis = "end of the last good run"
        else:
            can, basis = _first_run(task), "first run (never succeeded)"
        return can, ref + task.period - avg, ref + task.period, basis
    if kind is ScheduleKind.CRON:
        assert task.cron is not None and task.cron_max_duration is not None
        can = next_cron_time(task.cron, task.tz, ref)
        limit = can + task.cron_max_duration
        return can, limit - avg, limit, f"next firing of {task.cron!r} after {fmt_instant(ref)}"
    interval = interval_of(task, task_type)
    if task.last_good_end_at is not None:
        can = to_utc(task.last_good_end_at) + interval
        basis = f"end of the last good run + interval {fmt_duration(interval)}"
    else:
        can, basis = _first_run(task), "first run (never succeeded)"
    return can, can + interval, can + interval, basis


def _fallback(task: Task, task_type: TaskType) -> datetime | None:
    """Next regular occurrence after a failed run that used up the retries."""
    anchor = task.last_start_at or task.last_end_at
    if anchor is None:
        return None
    anchor = to_utc(anchor)
    kind = task.schedule_kind
    if kind is ScheduleKind.PERIODIC and task.period is not None:
        return anchor + task.period
    if kind is ScheduleKind.ADAPTIVE:
        return anchor + interval_of(task, task_type)
    if kind is ScheduleKind.CRON and task.cron is not None:
        return next_cron_time(task.cron, task.tz, anchor)
    return None


def compute_start_times(
    task: Task,
    task_type: TaskType,
    now: datetime,
    *,
    retry_jitter_fraction: float | None = None,
) -> StartTimes:
    """:func:`start_times` with control over the retry jitter.

    With ``retry_jitter_fraction`` (in [0, 1]) the awaited retry waits its base
    delay plus that fraction of ``retry_jitter``: this is how
    :func:`apply_outcome` draws it. Without it, the jitter chosen then is read
    back from the stored ``next_run``, clamped into the jitter window
    ``[end + base, end + base + retry_jitter]``, so that recomputing later
    gives the same answer without any randomness.
    """
    now = to_utc(now)
    can, should, finish_by, basis = _normal_times(task, task_type)
    normal = can
    adjustments: list[Adjustment] = []

    def move(kind: AdjustmentKind, to: datetime, detail: str) -> None:
        nonlocal can
        if to > can:
            adjustments.append(Adjustment(kind, can, to, detail))
            can = to

    if task.schedule_kind is ScheduleKind.PERIODIC and task.last_good_end_at is not None:
        cooldown = task.cooldown or ZERO
        ended = to_utc(task.last_good_end_at)
        move(AdjustmentKind.COOLDOWN, ended + cooldown, f"cooldown of {fmt_duration(cooldown)}")

    state = retry_state(task, task_type)
    last_end = task.last_end_at or task.last_start_at
    if state.retry is not None and last_end is not None:
        base = to_utc(last_end) + retry_base_delay(task_type, state.retry)
        jitter = task_type.retry_jitter
        if retry_jitter_fraction is not None:
            retry_at = base + jitter * retry_jitter_fraction
        else:
            retry_at = min(max(to_utc(task.next_run), base), base + jitter)
        budget = state.retry + state.retries_left
        move(
            AdjustmentKind.RETRY_BACKOFF,
            retry_at,
            f"retry {state.retry} of {budget} after {task.failure_count} consecutive "
            f"failure(s); the last run ended at {fmt_instant(last_end)} and the retry waits "
            f"{fmt_duration(retry_at - to_utc(last_end))}",
        )
    elif state.exhausted and task.schedule_kind is not ScheduleKind.ONESHOT:
        fallback = _fallback(task, task_type)
        if fallback is not None:
            move(
                AdjustmentKind.RETRIES_EXHAUSTED,
                fallback,
                f"the {plural(task.failure_count, 'consecutive failure')} used up the retries; "
                "back to the normal schedule, counted from the failed run",
            )

    if task.blackout_periods:
        probe = can
        left = blackout_end(task, probe)
        if left <= now and blackout_at(task, now) is not None:
            probe, left = now, blackout_end(task, now)
        if left != probe:
            window = blackout_at(task, probe)
            label = "now" if probe == now and probe != can else fmt_instant(probe)
            move(
                AdjustmentKind.BLACKOUT,
                left,
                f"{label} ({fmt_clock(probe, task.tz)} in {task.tz}) falls in the blackout "
                f"window {window} there; it may start when the blackout ends at "
                f"{fmt_local(left, task.tz)}",
            )
    return StartTimes(
        can_start_by=can,
        should_start_by=should,
        adjustments=tuple(adjustments),
        finish_by=finish_by,
        reference_start=reference_start(task),
        basis=basis,
        normal_can_start_by=normal,
    )


def start_times(task: Task, task_type: TaskType, now: datetime) -> StartTimes:
    """can_start_by (may run from), should_start_by (must start by) and adjustments.

    Pure: ``now`` only matters for blackouts (a past can_start_by while
    ``now`` is inside a window moves to that window's end). Works for a freshly
    built task (empty statistics): that is how the initial ``next_run`` and
    ``deadline`` are set.
    """
    return compute_start_times(task, task_type, now)
