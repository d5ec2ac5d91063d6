"""How often a task is meant to run, from its own schedule.

* :func:`written_interval`: the interval a task's schedule promises between
  two of its runs, as written (adaptive: its interval when created, the
  group's or the type's default; periodic: its period; cron: the mean
  spacing of its firings; one-shot: none). A simulation compares it with
  the time it delivered between two good starts (:mod:`.results`).
* :func:`cycle`: the time between two runs a task may ask for when the
  workers keep up (adaptive: its interval; periodic: its cooldown plus a
  run, as :meth:`.workload.Workload.demand` counts it); the peak model
  (:mod:`.peaks`) and ``--from-store``'s load (:mod:`.live`) read it.
* :func:`runs_within`: how many runs a live task asks for within a horizon.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from ..domain.model import ScheduleKind, Task
from ..policy import cron_times, default_cooldown, run_time_basis
from ..policy.times import to_utc

#: a cron's spacing is its mean gap over at least this long
CRON_SPAN = timedelta(days=7)


@lru_cache(maxsize=256)
def cron_spacing(expr: str, tz: str, start: datetime, span: timedelta = CRON_SPAN) -> float:
    """The mean seconds between two consecutive firings of ``expr`` in
    ``tz`` after ``start``: over ``span`` (at least two firings: the first
    two otherwise)."""
    firings: list[datetime] = []
    for instant in cron_times(expr, tz, start):
        if len(firings) >= 2 and instant > start + span:
            break
        firings.append(instant)
    return (firings[-1] - firings[0]).total_seconds() / (len(firings) - 1)


def written_interval(task: Task, start: datetime, horizon: timedelta) -> float | None:
    """The seconds ``task``'s schedule promises between two runs as written
    (None for a one-shot task). A cron's is its mean spacing over the
    horizon (a week at least: ``0 18 * * 5`` is weekly in a one-day run)."""
    kind = task.schedule_kind
    if kind is ScheduleKind.ADAPTIVE and task.current_interval is not None:
        return task.current_interval.total_seconds()
    if kind is ScheduleKind.PERIODIC and task.period is not None:
        return task.period.total_seconds()
    if kind is ScheduleKind.CRON and task.cron is not None:
        return cron_spacing(task.cron, task.tz, to_utc(start), max(horizon, CRON_SPAN))
    return None


def cycle(task: Task, mean_duration: timedelta) -> timedelta | None:
    """The time between two runs ``task`` asks for when the workers keep up
    (None for a one-shot or cron task): an adaptive task's interval; a
    periodic task's cooldown (the store's default when none was given,
    which follows the runs' average: here ``mean_duration``) plus its mean
    run, since it may run again a cooldown after its last good end. At
    least a second."""
    kind = task.schedule_kind
    if kind is ScheduleKind.ADAPTIVE and task.current_interval is not None:
        return max(timedelta(seconds=1), task.current_interval)
    if kind is ScheduleKind.PERIODIC and task.period is not None:
        cooldown = task.cooldown
        if cooldown is None or task.cooldown_is_default:  # it follows the runs' average
            basis = run_time_basis(task.expected_duration, mean_duration)
            cooldown = default_cooldown(task.period, basis)
        return max(timedelta(seconds=1), cooldown + mean_duration)
    return None


def due_times(
    task: Task, mean_duration: timedelta, start: datetime, horizon: timedelta
) -> list[datetime]:
    """The instants at which a live ``task`` falls due within ``[start,
    start + horizon)`` when the workers keep up: its ``next_run`` (``start``
    when it is overdue), then every :func:`cycle` (cron: every firing after
    it); a one-shot task once."""
    end = start + horizon
    first = max(to_utc(start), to_utc(task.next_run))
    if first >= end:
        return []
    times = [first]
    if task.schedule_kind is ScheduleKind.CRON and task.cron is not None:
        for instant in cron_times(task.cron, task.tz, first):
            if instant >= end:
                break
            times.append(instant)
        return times
    step = cycle(task, mean_duration)
    if step is None:
        return times
    while (following := times[-1] + step) < end:
        times.append(following)
    return times


def runs_within(task: Task, mean_duration: timedelta, start: datetime, horizon: timedelta) -> float:
    """How many runs a live ``task`` asks for within the horizon, from its
    own schedule (:func:`due_times`; an adaptive or periodic task at its
    rate, the fraction of a run at the end counted: a task every 8 h asks
    for 3 runs a day, wherever its next run falls)."""
    kind = task.schedule_kind
    step = cycle(task, mean_duration)
    if kind in (ScheduleKind.ADAPTIVE, ScheduleKind.PERIODIC) and step is not None:
        return horizon / step
    return float(len(due_times(task, mean_duration, start, horizon)))
