"""The runner daemon: a thin loop around :func:`~.dispatch.tick`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from celery import Celery

from ..exceptions import SchedulerError
from ..model import Priority
from ..store import SchedulerStore
from . import metrics
from .dispatch import PassReport, tick
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
) -> None:
    """Pass after pass until ``stop`` is set; between passes, sleep until the
    next task is ready (at most ``period``) or a new task wakes the runner.
    With ``republish_after``, each pass also re-publishes runs dispatched
    that long ago that never started."""
    logger.info(
        "runner started: types=%s priorities=%s period=%ss",
        ",".join(types) if types else "all",
        ",".join(priorities) if priorities else "all",
        period,
    )
    while not stop.is_set():
        try:
            report = tick(store, app, clock(), types=types, priorities=priorities, workers=workers)
            if republish_after is not None:
                republish_unstarted(
                    store, app, clock(), older_than=republish_after, workers=workers
                )
        except SchedulerError as error:
            # the database is down or refused: keep running, try again later
            logger.error("runner pass failed: %s", error)
            metrics.PASS_ERRORS.labels(stage="database").inc()
            report = PassReport(now=clock(), errors=(str(error),), saturated=True)
        metrics.PASSES.inc()
        if on_pass is not None:
            on_pass(report)
        if stop.is_set():
            break
        waker.wait(report.sleep_seconds(period))
    logger.info("runner stopped")
