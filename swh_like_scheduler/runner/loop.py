"""The runner daemon: a thin loop around :func:`~.dispatch.tick`, taking its
turn at the monitor's duties (:func:`~swh_like_scheduler.monitor.monitor_tick`)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from celery import Celery

from ..exceptions import SchedulerError
from ..listener.handler import TaskTypeCache, outcome_applier
from ..model import Priority
from ..monitor.duties import MonitorSettings, monitor_tick, release
from ..outage import Outage
from ..store import SchedulerStore
from . import metrics
from .dispatch import CLAIMERS, PassReport, tick
from .republish import republish_unstarted
from .routing import LiveWorkers
from .wakeup import Waker

logger = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(tz=UTC)


def run(
    store: SchedulerStore,
    app: Celery,
    waker: Waker,
    *,
    period: float,
    stop: threading.Event,
    types: Sequence[str] | None = None,
    priorities: Sequence[Priority] | None = None,
    clock: Callable[[], datetime] = utcnow,
    on_pass: Callable[[PassReport], None] | None = None,
    workers: LiveWorkers | None = None,
    republish_after: timedelta | None = None,
    monitor: MonitorSettings | None = None,
    claimers: int = CLAIMERS,
) -> None:
    """Pass after pass until ``stop`` is set; between passes, sleep until the
    next task is ready (at most ``period``) or a new task wakes the runner.

    With ``monitor``, the runner also tries the monitor's lock every
    ``monitor.period`` (its sleeps are shortened to keep that pace) and,
    when it holds it, does the monitor's duties, re-publishing included
    (``monitor.republish_after``); the lock is released when the loop
    stops. Without ``monitor``, each pass publishes the orphans of dead
    runners and, with ``republish_after``, re-publishes runs dispatched that
    long ago whose message seems lost (:mod:`.republish`).
    ``claimers``: see :func:`~.dispatch.tick`."""
    logger.info(
        "runner started: types=%s priorities=%s period=%ss monitor=%s",
        ",".join(types) if types else "all",
        ",".join(priorities) if priorities else "all",
        period,
        "on" if monitor is not None else "off",
    )
    apply = outcome_applier(TaskTypeCache(store), random.Random()) if monitor else None
    monitor_due = time.monotonic()
    pass_outage = Outage(logger, "runner pass")
    monitor_outage = Outage(logger, "monitor duties")
    try:
        while not stop.is_set():
            try:
                report = tick(
                    store,
                    app,
                    clock(),
                    types=types,
                    priorities=priorities,
                    workers=workers,
                    claimers=claimers,
                )
                if monitor is None:
                    republish_unstarted(
                        store, app, clock(), older_than=republish_after, workers=workers
                    )
            except SchedulerError as error:
                # the database is down or refused: keep running, try again later
                pass_outage.failed(error)
                metrics.PASS_ERRORS.labels(stage="database").inc()
                report = PassReport(now=clock(), errors=(str(error),), saturated=True)
            else:
                pass_outage.ok()
            metrics.PASSES.inc()
            if monitor is not None and time.monotonic() >= monitor_due:
                monitor_due = time.monotonic() + monitor.period.total_seconds()
                try:
                    monitor_tick(
                        store, clock(), settings=monitor, app=app, workers=workers, apply=apply
                    )
                except SchedulerError as error:
                    monitor_outage.failed(error)
                    metrics.PASS_ERRORS.labels(stage="monitor").inc()
                else:
                    monitor_outage.ok()
            if on_pass is not None:
                on_pass(report)
            if stop.is_set():
                break
            wait = report.sleep_seconds(period)
            if monitor is not None:
                wait = min(wait, max(0.0, monitor_due - time.monotonic()))
            waker.wait(wait)
    finally:
        if monitor is not None:
            release(store, monitor)
    logger.info("runner stopped")
