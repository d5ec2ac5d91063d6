"""One pass of the monitor's duties, and the loop that repeats it."""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..lease.protocol import StealReport
from ..listener.handler import TaskTypeCache, outcome_applier
from ..store import SchedulerStore
from ..store.interface import ApplyOutcome

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MonitorSettings:
    """The durations of the steal protocol (DESIGN.md §4; tests use seconds).

    ``ping_timeout``: silence after which an owner is put on notice;
    ``grace``: how long it then has to ping before its run is lost;
    ``period``: the pause between two passes of the loop."""

    ping_timeout: timedelta = timedelta(seconds=30)
    grace: timedelta = timedelta(seconds=30)
    period: timedelta = timedelta(seconds=10)


@dataclass(frozen=True)
class MonitorReport:
    """What one pass did, duty by duty."""

    steal: StealReport


def monitor_tick(
    store: SchedulerStore,
    now: datetime | None = None,
    *,
    ping_timeout: timedelta,
    grace: timedelta,
    apply: ApplyOutcome | None = None,
) -> MonitorReport:
    """One pass over the monitor's duties.

    ``now`` is for duties that run on the caller's clock; the steal step
    reads the database's. ``apply`` is the policy's outcome (the listener's
    :func:`outcome_applier` when ``None``), so a stolen run updates its
    task exactly as a ``lost`` event would."""
    del now  # no duty on the caller's clock yet
    if apply is None:
        apply = outcome_applier(TaskTypeCache(store), random.Random())
    steal = store.steal_expired_leases(ping_timeout=ping_timeout, grace=grace, apply=apply)
    if steal.warned:
        logger.warning(
            "%d lease(s) without a ping for %s: steal started", len(steal.warned), ping_timeout
        )
    for run in steal.stolen:
        logger.warning(
            "run %s of task %s lost: lease stolen from %s", run.backend_id, run.task_id, run.worker
        )
    return MonitorReport(steal=steal)


def monitor_loop(
    store: SchedulerStore,
    settings: MonitorSettings,
    *,
    stop: threading.Event | None = None,
    once: bool = False,
) -> MonitorReport | None:
    """Run :func:`monitor_tick` every ``settings.period`` until ``stop`` is
    set (or once). Store errors are logged and the next pass tries again.
    Returns the last pass's report."""
    stop = stop or threading.Event()
    apply = outcome_applier(TaskTypeCache(store), random.Random())
    last: MonitorReport | None = None
    while True:
        try:
            last = monitor_tick(
                store, ping_timeout=settings.ping_timeout, grace=settings.grace, apply=apply
            )
        except Exception:  # the database may be down for a while: keep going
            if once:
                raise
            logger.exception("monitor pass failed; trying again in %s", settings.period)
        if once or stop.wait(settings.period.total_seconds()):
            return last
