"""Adaptive intervals that respect the capacity of their type.

The per-task rule (:func:`next_interval`) shrinks an interval when a
visit finds a change and lengthens it when it finds none. On its own it has
no way back when the type cannot keep up: sources that always change keep
their short intervals, the demand they add is where capacity is short, and
the order of dispatch decides who starves. The capacity-aware rule reads
what the monitor measured of the type's adaptive tasks
(:class:`~swh_like_scheduler.domain.model.TypeLoad`: the work they ask for at their
intervals, *demand* D; the work their runs took over the last window,
*delivered* R; how many wait overdue, *backlog*) and, with the pressure
p = D / R:

* **saturated** (some task overdue: the workers did not keep up): no
  interval shrinks, and when p > 1 + :data:`TOLERANCE` every visited task
  lengthens its interval by min(f, p x (1 + :data:`MARGIN`)) -- once each
  task was visited, the demand is just under what the workers delivered,
  which, saturated, is their capacity;
* **not saturated** (nothing overdue): an eventful visit may shrink the
  interval by at most min(f, (1 + :data:`HEADROOM`) / p) -- the demand grows
  by at most a quarter of what was delivered per round of visits, and stops
  growing as soon as tasks wait; with capacity to spare every source that
  keeps changing reaches ``min_interval``.

Without a backoff factor, a measurement, a delivered work (no run ended in
the window) or with a measurement older than :data:`LOAD_MAX_AGE`, the
per-task rule applies alone. The interval always stays within
``[min_interval, max_interval]``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..domain.model import TaskType
from .times import to_utc

#: a measurement older than this (the monitor stopped) steers nothing
LOAD_MAX_AGE = timedelta(hours=1)
#: pressure above 1 that is not yet overload (measurement noise, lags)
TOLERANCE = 0.1
#: when saturated, the demand is brought this far under the delivered work
#: (so that the overdue tasks are caught up with)
MARGIN = 0.05
#: when not saturated, how much the demand may grow above the delivered
#: work through the shrinks of one round of visits
HEADROOM = 0.25


def next_interval(
    current: timedelta,
    task_type: TaskType,
    *,
    eventful: bool,
    gap: timedelta | None = None,
) -> timedelta:
    """An adaptive interval after a good run, kept within ``[min_interval, max_interval]``.

    Eventful: ``min(I, G / backoff_factor)`` (come back sooner), where ``G``
    (``gap``) is the time since the start of the previous good run. A run on
    time (``G`` just over ``I``) gives about ``I / backoff_factor``; a run so
    late that ``G >= I * backoff_factor`` keeps ``I``, because a change found
    after waiting that long is what ``I`` already expects. Without this,
    every late visit under overload would shrink its interval and add demand
    where capacity is short. Without ``gap``: ``I / backoff_factor``.
    Uneventful: ``I * backoff_factor`` (come back later).
    Without a ``backoff_factor`` the interval does not adapt. A missing bound
    leaves that side open (but never below one second).
    """
    factor = task_type.backoff_factor
    interval = current
    if factor is not None:
        if not eventful:
            interval = current * factor
        elif gap is not None and gap > timedelta(0):
            interval = min(current, gap / factor)
        else:
            interval = current / factor
    return clamp_interval(interval, task_type)


def clamp_interval(interval: timedelta, task_type: TaskType) -> timedelta:
    """``interval`` within ``[min_interval, max_interval]`` (a missing bound
    leaves that side open, but never below one second)."""
    lo, hi = task_type.min_interval, task_type.max_interval
    if lo is not None:
        interval = max(lo, interval)
    if hi is not None:
        interval = min(hi, interval)
    return max(interval, timedelta(seconds=1))


def pressure(task_type: TaskType, now: datetime) -> float | None:
    """The type's demand over its delivered work, from a measurement at
    most :data:`LOAD_MAX_AGE` old at ``now``; ``None`` when unknown."""
    load = task_type.load
    if load is None or to_utc(now) - to_utc(load.measured_at) > LOAD_MAX_AGE:
        return None
    return load.pressure


def adapt_interval(
    current: timedelta,
    task_type: TaskType,
    *,
    eventful: bool,
    gap: timedelta | None,
    now: datetime,
) -> timedelta:
    """The interval after a good run that ended at ``now`` (rule in the
    module doc); ``gap``: the time since the previous good start."""
    plain = next_interval(current, task_type, eventful=eventful, gap=gap)
    factor = task_type.backoff_factor
    load = task_type.load
    ratio = pressure(task_type, now)
    if factor is None or load is None or ratio is None:
        return plain
    if load.backlog > 0:
        grow = min(factor, ratio * (1 + MARGIN)) if ratio > 1 + TOLERANCE else 1.0
        return clamp_interval(max(plain, current * grow), task_type)
    if not eventful:
        return plain
    shrink = min(factor, max(1.0, (1 + HEADROOM) / ratio))
    return clamp_interval(max(plain, current / shrink), task_type)
