"""A periodic task whose cooldown makes every run late, by construction.

A run of a periodic task that started at s and took e (its measured
average, else its expected duration) lets the next one start at
s + e + cooldown (its end plus the cooldown), while the next one should
start by s + period - a (``a``: the duration its should_start_by counts, the
expected duration when given, else the average). When
e + cooldown > period - a, every run starts late, however idle the
platform, and its data go stale for as long: with one duration d for both,
when the cooldown is longer than period - 2 d. The default cooldown
(:func:`.validate.default_cooldown`, 90 % of the period less twice the run
time, following the run time) never is; a cooldown a client gave may be.
:func:`cooldown_shortfall` says so with the task's numbers, for ``task
explain``, the task's condition (:mod:`.condition`) and ``import-beat``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from ..domain.model import ScheduleKind, Task
from .times import ZERO, effective_average, fmt_duration, measured_run_time


@dataclass(frozen=True)
class CooldownShortfall:
    """The numbers of a periodic task late by construction (module doc)."""

    period: timedelta
    cooldown: timedelta
    #: how long its runs take: the measured average, else the expected duration
    run_time: timedelta
    #: the duration its should_start_by counts (expected duration, else the average)
    counted: timedelta
    #: ``measured`` or ``expected``: where ``run_time`` comes from
    source: str

    @property
    def late(self) -> timedelta:
        """How late each run starts: its earliest start past its should_start_by."""
        return self.run_time + self.cooldown - (self.period - self.counted)

    @property
    def longest_on_time(self) -> timedelta:
        """The longest cooldown with which a run can start in time (may be
        negative: then none can)."""
        return self.period - self.run_time - self.counted

    def detail(self) -> str:
        """One sentence with the task's numbers, and what to do."""
        run, cool, period = (fmt_duration(d) for d in (self.run_time, self.cooldown, self.period))
        took = "take" if self.source == "measured" else "are expected to take"
        counted = fmt_duration(self.counted)
        if self.counted == self.run_time:
            twice = f"period - 2 x {run}"
        else:
            twice = f"period - {run} - {counted}"
            counted += " (its expected duration)"
        longest = self.longest_on_time
        if longest > ZERO:
            advice = f"lower the cooldown to {fmt_duration(longest)} or less ({twice})"
        else:
            advice = (
                "even without a cooldown the runs take too long for the period: lengthen the period"
            )
        return (
            f"Runs {took} {run} on average: with the cooldown of {cool}, a run may start "
            f"again {fmt_duration(self.run_time + self.cooldown)} after the last one started "
            f"({run} + {cool}), while it should start within {period} - {counted} = "
            f"{fmt_duration(self.period - self.counted)}: each run will start "
            f"{fmt_duration(self.late)} late. To keep the period, {advice}; a periodic task "
            "created without a cooldown gets a default one that follows its run time."
        )


def cooldown_shortfall(task: Task) -> CooldownShortfall | None:
    """The numbers of ``task`` when its cooldown makes each run late by
    construction (module doc); ``None`` when it does not, when the task is not
    periodic, has no cooldown, or no known run time (neither a measured
    average nor an expected duration)."""
    if task.schedule_kind is not ScheduleKind.PERIODIC or task.period is None:
        return None
    cooldown = task.cooldown or ZERO
    if cooldown <= ZERO:
        return None
    known = measured_run_time(task)
    if known is None:
        return None
    run_time, source = known
    counted = effective_average(task)
    if run_time + cooldown <= task.period - counted:
        return None
    return CooldownShortfall(task.period, cooldown, run_time, counted, source)
