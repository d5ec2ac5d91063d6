"""Catch-up after missed firings: run the latest once, late, or skip them.

A firing is *missed* when a runner finds it later than the grace period:
nothing ran while it was due (the platform was down, no runner passed, its
type was paused) or its queue held it back that long. ``catch_up`` (the
task's, else its type's) says what then happens:

* ``latest`` — the task runs once, late, at the first chance; however many
  firings were missed, they are served by that one run;
* ``skip`` — the firings later than ``catch_up_grace`` (the task's, else its
  type's) are dropped: the task waits for its next firing, and the stretch
  of dropped firings is recorded as **one** ``skipped`` run saying why.

The instant a firing is late from, by kind:

=========  ======================================  ===================================
kind       late from                               the firing it resumes at
=========  ======================================  ===================================
cron       can_start_by (the firing itself)        the first firing at or after
                                                   ``now - grace``
periodic   should_start_by (the due instant),      the first of ``should + k * period``
           never before can_start_by               at or after ``now - grace``
adaptive   as periodic, with the interval          as periodic, with the interval
oneshot    should_start_by (T + ``max_delay``)     none: the task is disabled
=========  ======================================  ===================================

A task resumed by a skip keeps the firing it resumed at in
``skipped_until``: :mod:`.schedule` never puts its firing before it, so the
condition counts the dropped firings neither as late nor as failed.
Everything here is pure: ``now`` is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..domain.model import CatchUp, ScheduleKind, Task, TaskStatus, TaskType
from ..domain.text import plural
from .cron import next_cron_time
from .schedule import compute_start_times, interval_of
from .times import fmt_duration, fmt_instant, to_utc

#: missed cron firings counted one by one at most (a cron firing every
#: second over a day-long outage is reported as "more than" this many)
MAX_COUNTED = 1000
_TICK = timedelta(microseconds=1)


def catch_up_of(task: Task, task_type: TaskType) -> tuple[CatchUp, timedelta]:
    """The catch-up policy and grace that apply to ``task``: its own, else its type's."""
    policy = task.catch_up or task_type.catch_up
    grace = task.catch_up_grace or task_type.catch_up_grace
    return CatchUp(policy), grace


@dataclass(frozen=True)
class MissedFirings:
    """A stretch of missed firings that ``catch_up = skip`` drops."""

    #: the first firing missed (its due instant)
    first: datetime
    #: how many firings the stretch holds (at most :data:`MAX_COUNTED` for cron)
    count: int
    #: the count stopped at :data:`MAX_COUNTED`: there were more
    more: bool
    #: the firing the task resumes at (``None``: a one-shot, disabled)
    resume_at: datetime | None
    grace: timedelta
    now: datetime

    @property
    def reason(self) -> str:
        """Why nothing ran: the sentence kept on the ``skipped`` run."""
        many = f"more than {self.count:,} firings" if self.more else plural(self.count, "firing")
        late = fmt_duration(self.now - self.first)
        head = (
            f"skipped: {many} from {fmt_instant(self.first)} missed; the first was "
            f"{late} late at {fmt_instant(self.now)}, more than the catch-up grace of "
            f"{fmt_duration(self.grace)} (catch_up skip)"
        )
        if self.resume_at is None:
            return f"{head}; the one-shot task is disabled"
        return f"{head}; the next firing is at {fmt_instant(self.resume_at)}"


def _late_from(task: Task, can: datetime, should: datetime) -> datetime:
    if task.schedule_kind is ScheduleKind.CRON:
        return can
    return max(can, should)


def missed_firings(task: Task, task_type: TaskType, now: datetime) -> MissedFirings | None:
    """The firings of ``task`` that ``catch_up = skip`` drops at ``now``;
    ``None`` when it runs (policy ``latest``, not waiting, or not later than
    the grace; rules in the module doc)."""
    policy, grace = catch_up_of(task, task_type)
    if policy is not CatchUp.SKIP or task.status is not TaskStatus.WAITING:
        return None
    now = to_utc(now)
    times = compute_start_times(task, task_type, now)
    late = _late_from(task, times.can_start_by, times.should_start_by)
    cutoff = now - grace
    if late >= cutoff:
        return None
    kind = task.schedule_kind
    if kind is ScheduleKind.ONESHOT:
        return MissedFirings(times.should_start_by, 1, False, None, grace, now)
    if kind is ScheduleKind.CRON:
        assert task.cron is not None
        resume = next_cron_time(task.cron, task.tz, cutoff - _TICK)
        count, firing = 0, late
        while firing < resume and count < MAX_COUNTED:
            count += 1
            firing = next_cron_time(task.cron, task.tz, firing)
        return MissedFirings(late, count, firing < resume, resume, grace, now)
    step = task.period if kind is ScheduleKind.PERIODIC else interval_of(task, task_type)
    assert step is not None
    should = times.should_start_by
    steps = max(1, math.ceil((cutoff - should) / step))
    resume = should + step * steps
    if resume < cutoff:  # rounding of the division: one step more
        steps += 1
        resume += step
    return MissedFirings(should, steps, False, resume, grace, now)


def after_skip(task: Task, task_type: TaskType, missed: MissedFirings, now: datetime) -> Task:
    """``task`` once ``missed`` is dropped: a recurring task waits for the
    firing it resumes at (``skipped_until``; its times computed again at
    ``now``), a one-shot task is disabled. Its ``next_run`` is always after
    the slot it had, which the ``skipped`` run takes."""
    slot = to_utc(task.next_run)
    if missed.resume_at is None:
        return task.updated(status=TaskStatus.DISABLED, next_run=slot + _TICK)
    resumed = task.updated(skipped_until=missed.resume_at)
    times = compute_start_times(resumed, task_type, now)
    return resumed.updated(
        next_run=max(times.can_start_by, slot + _TICK), deadline=times.should_start_by
    )
