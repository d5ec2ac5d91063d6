"""Peak demand: the bursts a type's mean load hides, from the workload's
definition alone (no simulation).

A type's mean load (:meth:`.workload.Workload.natural_load`) spreads its
work over the horizon; its tasks may fall due together: cron firings at the
same minute, a burst of one-shots, first runs spread over an hour. Here the
work of every task (its mean run) is placed at the instants it falls due,
when the workers keep up, in one-minute bins over the horizon:

* one-shot: once, uniformly over the group's ``spread`` (a live task: at its
  ``next_run``, or at the start when overdue);
* cron: at every firing (every task of a group fires at once);
* adaptive and periodic: first uniformly over the ``spread``, then every
  :func:`.cadence.cycle` (adaptive: the interval; periodic: cooldown plus a
  run), as :meth:`~.workload.Workload.demand` counts them;
* work due inside a blackout window falls due at its end.

Then the type's workers drain it as a fluid: the work waiting after each
minute is what waited before, plus what fell due, less a minute of every
worker. A **burst** lasts from the minute work starts waiting until nothing
waits; its **window** is from its first minute to the minute the most work
waits (the work that fell due then, over the window's length, is the
demand in workers' worth: more than the workers, or nothing would wait);
its **delay** is the most work waiting over the workers (the last run due
at the peak starts that late at best); its **drain** the time from the
window's start until nothing waits. A type's peak is its burst with the
longest delay; it is an overload (:func:`peak_overloads`: warned, in the
report and in the JSON's ``peak_overload``) when that delay is at least
:data:`PEAK_DELAY` while the type's mean load is within its workers (at a
mean load over 100 % work waits anyway). Retries are not counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..domain.model import BlackoutPeriod, ScheduleKind, Task
from ..intake.builders import task_from_input
from ..policy import cron_times
from ..policy.blackout import leave_blackouts
from .behaviour import TaskBehaviour
from .cadence import cycle, due_times
from .workload import LOAD_TOLERANCE, TaskGroup, Workload

#: the model's resolution, seconds
BIN = 60.0
#: a burst whose last run waits this long at best is an overload
PEAK_DELAY = timedelta(minutes=5)
#: cycles of a group placed one by one; beyond, the rest of the horizon at the rate
MAX_CYCLES = 100_000


def percent(share: float) -> str:
    """A share for a person: ``89%``, ``0.4%``."""
    return f"{share:.0%}" if share >= 0.1 or share == 0 else f"{share:.1%}"


def span(seconds: float) -> str:
    """A duration for a person: ``45 s``, ``14 min``, ``4.1 h``, ``2.3 days``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


@dataclass(frozen=True)
class Peak:
    """A type's worst burst (see the module's description)."""

    type: str
    workers: int
    #: the type's mean load over its workers (:meth:`Workload.natural_load`)
    mean_load: float
    start: datetime
    end: datetime
    #: worker-seconds that fell due from ``start`` to ``end``
    work: float
    #: the most worker-seconds waiting (at ``end``)
    backlog: float
    #: from ``start`` until nothing waits; None: work still waits at the horizon's end
    drain: timedelta | None

    @property
    def demand(self) -> float:
        """The window's work in workers' worth (worker-seconds per second)."""
        return self.work / max(BIN, (self.end - self.start).total_seconds())

    @property
    def delay(self) -> timedelta:
        """How long the last run due at the peak waits, at best."""
        return timedelta(seconds=self.backlog / self.workers)

    def to_json(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "mean_load": round(self.mean_load, 4),
            "window_start": self.start.isoformat(),
            "window_end": self.end.isoformat(),
            "due_worker_seconds": round(self.work, 1),
            "demand_workers": round(self.demand, 3),
            "backlog_worker_seconds": round(self.backlog, 1),
            "delay_s": round(self.delay.total_seconds(), 1),
            "drain_s": None if self.drain is None else round(self.drain.total_seconds(), 1),
        }


class _Bins:
    """Work falling due per minute of the horizon: points, and uniform
    spans (a difference array for their whole minutes)."""

    def __init__(self, horizon: timedelta) -> None:
        self.count = max(1, math.ceil(horizon.total_seconds() / BIN))
        self.end = self.count * BIN
        self.work = [0.0] * self.count
        self.diff = [0.0] * (self.count + 1)

    def point(self, at: float, mass: float) -> None:
        if 0 <= at < self.end:
            self.work[int(at // BIN)] += mass

    def uniform(self, low: float, high: float, mass: float) -> None:
        if high <= low:
            self.point(low, mass)
            return
        density = mass / (high - low)
        low, high = max(low, 0.0), min(high, self.end)
        if high <= low:
            return
        first, last = int(low // BIN), int(high // BIN)
        if first == last:
            self.work[first] += density * (high - low)
            return
        self.work[first] += density * ((first + 1) * BIN - low)
        self.diff[first + 1] += density * BIN
        self.diff[last] -= density * BIN
        if last < self.count:
            self.work[last] += density * (high - last * BIN)

    def values(self) -> list[float]:
        values, running = [], 0.0
        for index in range(self.count):
            running += self.diff[index]
            values.append(self.work[index] + running)
            self.diff[index] = 0.0
        self.work = values
        return values

    def add(self, other: _Bins) -> None:
        for index, value in enumerate(other.values()):
            self.work[index] += value


def _out_of_blackouts(
    bins: _Bins, periods: Sequence[BlackoutPeriod], tz: str, start: datetime
) -> _Bins:
    """``bins`` with the work due inside a window moved to the window's end."""
    moved = _Bins(timedelta(seconds=bins.end))
    for index, value in enumerate(bins.values()):
        if value:
            at = start + timedelta(seconds=index * BIN)
            moved.point((leave_blackouts(periods, tz, at) - start).total_seconds(), value)
    return moved


def _group_work(workload: Workload, group: TaskGroup) -> _Bins:
    """The work of ``group``'s tasks, where it falls due."""
    bins = _Bins(workload.horizon)
    if group.count == 0:
        return bins
    start = workload.start
    task_type = workload.task_type(group.type)
    task = task_from_input(
        {**group.fields, "next_run": start.isoformat()}, task_type, now=workload.start
    )
    mean = group.duration.mean
    mass = group.count * mean.total_seconds()
    low, high = (d.total_seconds() for d in group.spread)
    if task.schedule_kind is ScheduleKind.CRON and task.cron is not None:
        # a cron task fires at its firings after its creation, whatever the spread
        for instant in cron_times(task.cron, task.tz, start):
            if instant - start >= workload.horizon:
                break
            bins.point((instant - start).total_seconds(), mass)
    else:
        step = cycle(task, mean)
        if step is None:
            bins.uniform(low, high, mass)
        else:
            seconds = step.total_seconds()
            cycles = min(MAX_CYCLES, max(0, math.ceil((bins.end - low) / seconds)))
            for k in range(cycles):
                bins.uniform(low + k * seconds, high + k * seconds, mass)
            if low + cycles * seconds < bins.end:  # the rest, at the rate
                rest = low + cycles * seconds
                bins.uniform(rest, bins.end, mass * (bins.end - rest) / seconds)
    if task.blackout_periods:
        return _out_of_blackouts(bins, task.blackout_periods, task.tz, start)
    return bins


def _task_work(
    workload: Workload, task: Task, behaviour: TaskBehaviour, bins: dict[str, _Bins]
) -> None:
    """Add a live task's work where it falls due (``--from-store``)."""
    mean = (behaviour.duration or behaviour.group.duration).mean
    start = workload.start
    for instant in due_times(task, mean, start, workload.horizon):
        if task.blackout_periods:
            instant = leave_blackouts(task.blackout_periods, task.tz, instant)
        bins[task.type].point((instant - start).total_seconds(), mean.total_seconds())


def due_work(
    workload: Workload, tasks: Sequence[tuple[Task, TaskBehaviour]] | None = None
) -> dict[str, list[float]]:
    """Per type, the worker-seconds falling due in each minute of the
    horizon: of the workload's groups, or of ``tasks`` (``--from-store``)."""
    bins = {name: _Bins(workload.horizon) for name in workload.workers}
    if tasks is not None:
        for task, behaviour in tasks:
            _task_work(workload, task, behaviour, bins)
    else:
        for group in workload.groups:
            bins[group.type].add(_group_work(workload, group))
    return {name: b.values() for name, b in bins.items()}


#: a burst: first minute, minute of the most waiting, work due between them,
#: most waiting, drain seconds (None: not drained by the horizon's end)
Burst = tuple[int, int, float, float, float | None]


def _worst_burst(work: Sequence[float], workers: int) -> Burst:
    """``(first minute, minute of the most waiting, work due between them,
    most waiting, drain seconds or None)`` of the burst with the most work
    waiting; ``(0, 0, 0, 0, 0)`` when nothing ever waits."""
    capacity = workers * BIN
    threshold = capacity * 1e-9  # (a load of exactly 100 % leaves rounding errors)
    best: Burst = (0, 0, 0.0, 0.0, 0.0)
    waiting, first, top, top_at = 0.0, 0, 0.0, 0

    def ended(drain: float | None) -> None:
        nonlocal best
        if top > best[3]:
            best = (first, top_at, sum(work[first : top_at + 1]), top, drain)

    for index, value in enumerate(work):
        before = waiting
        waiting = max(0.0, before + value - capacity)
        if before <= threshold < waiting:  # a burst begins
            first, top, top_at = index, 0.0, index
        if waiting > top:
            top, top_at = waiting, index
        if before > threshold >= waiting:  # drained during this minute
            ended(index * BIN + (before + value) / workers - first * BIN)
    if waiting > threshold:
        ended(None)
    return best


def peaks(
    workload: Workload, tasks: Sequence[tuple[Task, TaskBehaviour]] | None = None
) -> dict[str, Peak]:
    """Per type, its worst burst (the types where work never waits are left out)."""
    loads = workload.natural_load()
    found = {}
    for name, work in sorted(due_work(workload, tasks).items()):
        workers = max(1, workload.workers[name])
        first, top_at, due, backlog, drain = _worst_burst(work, workers)
        if backlog <= 0:
            continue
        found[name] = Peak(
            type=name,
            workers=workers,
            mean_load=loads[name],
            start=workload.start + timedelta(seconds=first * BIN),
            end=workload.start + timedelta(seconds=(top_at + 1) * BIN),
            work=due,
            backlog=backlog,
            drain=None if drain is None else timedelta(seconds=drain),
        )
    return found


def peak_overloads(
    workload: Workload, tasks: Sequence[tuple[Task, TaskBehaviour]] | None = None
) -> dict[str, Peak]:
    """The types whose peak leaves a run waiting :data:`PEAK_DELAY` or more
    while their mean load is within their workers."""
    return {
        name: peak
        for name, peak in peaks(workload, tasks).items()
        if peak.delay >= PEAK_DELAY and peak.mean_load <= 1 + LOAD_TOLERANCE
    }


def _window(peak: Peak) -> str:
    start, end = peak.start, peak.end
    if end.date() == start.date():
        return f"{start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC"
    return f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"


def peak_text(peak: Peak) -> str:
    """One line: the type, its window, its demand against its workers, the
    wait and the drain."""
    drain = (
        "does not drain before the horizon ends"
        if peak.drain is None
        else f"drains in {span(peak.drain.total_seconds())}"
    )
    return (
        f"{peak.type}: {span(peak.work)} of work falls due {_window(peak)}, "
        f"{peak.demand:,.1f} workers' worth against {peak.workers} (mean load "
        f"{percent(peak.mean_load)}); a run due then waits {span(peak.delay.total_seconds())} "
        f"at best, and the burst {drain}"
    )


def peak_warning(peak: Peak, load: float | None = None) -> str:
    where = "" if load is None else f"load {load:.0%}: "
    return f"warning: {where}peak over the workers: {peak_text(peak)}"
