"""The runner daemon: a thin loop around :func:`~.dispatch.tick`, taking its
turn at the monitor's duties (:func:`~swh_like_scheduler.monitor.monitor_tick`).
:class:`RunnerLoop` is one step of it, shared with ``celery beat -S swh``."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from celery import Celery

from ..broker import BrokerError
from ..broker.connection import open_connection
from ..broker.depth import queue_depths
from ..dispatch import metrics
from ..dispatch.pools import PassPools
from ..dispatch.republish import republish_unstarted
from ..dispatch.routing import LiveWorkers
from ..dispatch.serve import CLAIMERS, PassReport, tick
from ..domain.exceptions import SchedulerError
from ..domain.model import RUNNER_ORDER, DispatchOrder, Priority
from ..monitor.duties import MonitorSettings, monitor_tick, release
from ..plumbing.outage import Outage
from ..recording import TaskTypeCache, outcome_applier
from ..store import SchedulerStore
from .wakeup import Waker

if TYPE_CHECKING:
    from ..index.keeper import IndexKeeper

logger = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(tz=UTC)


#: the first wait after a pass that left ready tasks held by another
#: transaction, doubled while they stay held, up to :data:`HELD_WAIT_CAP`
HELD_WAIT_FIRST = 1.0
#: at most this long, whatever the period, so that tasks freed by the end of
#: a stalled claim (its session ended by the server after
#: ``idle_in_transaction_session_timeout``, 30 s) are claimed within a minute
HELD_WAIT_CAP = 10.0


#: how often the depths of the queues a pass filled are read while they
#: drain, and how low a queue gets before the runner tops it up (a share
#: of its ``max_queue_length``)
DRAIN_POLL = 0.5
LOW_WATER = 0.5


def low_water(limit: int) -> int:
    """The depth at or under which a queue of ``limit`` is topped up."""
    return int(limit * LOW_WATER)


def held_wait(passes: int, period: float) -> float:
    """The longest wait after the ``passes``-th pass in a row that left
    ready tasks held by another transaction (a claim under way, or a
    stalled one): not at once (the rows are still held: that spun ~23
    passes a second), 1 s, then twice as long each time, at most
    :data:`HELD_WAIT_CAP` and never more than ``period``."""
    doubled = HELD_WAIT_FIRST * 2 ** min(max(passes - 1, 0), 16)
    return min(period, HELD_WAIT_CAP, doubled)


class RunnerLoop:
    """One runner's passes, one :meth:`step` at a time: ``start-runner``'s
    loop (:func:`run`) and ``celery beat -S swh`` (:mod:`.beat`) both drive
    it, so they dispatch, take the monitor's turn and survive outages alike.

    With ``monitor``, a step also tries the monitor's lock every
    ``monitor.period`` (the waits it returns are shortened to keep that
    pace) and, when it holds it, does the monitor's duties, re-publishing
    included (``monitor.republish_after``); :meth:`close` releases the lock.
    Without ``monitor``, each pass publishes the orphans of dead runners and,
    with ``republish_after``, re-publishes runs dispatched that long ago
    whose message seems lost (:mod:`.republish`). ``claimers`` and
    ``order``: see :func:`~.dispatch.tick`. With ``top_up`` (the default), a
    queue the last pass filled is topped up as it drains (:meth:`pause`)."""

    def __init__(
        self,
        store: SchedulerStore,
        app: Celery,
        *,
        period: float,
        types: Sequence[str] | None = None,
        priorities: Sequence[Priority] | None = None,
        clock: Callable[[], datetime] = utcnow,
        on_pass: Callable[[PassReport], None] | None = None,
        workers: LiveWorkers | None = None,
        republish_after: timedelta | None = None,
        monitor: MonitorSettings | None = None,
        claimers: int = CLAIMERS,
        order: DispatchOrder = RUNNER_ORDER,
        index: IndexKeeper | None = None,
        top_up: bool = True,
    ) -> None:
        self.store, self.app, self.period = store, app, period
        self.top_up = top_up
        self.index = index
        self.types, self.priorities, self.clock = types, priorities, clock
        self.on_pass, self.workers, self.claimers = on_pass, workers, claimers
        self.order = order
        self.republish_after, self.monitor = republish_after, monitor
        self._apply = outcome_applier(TaskTypeCache(store), random.Random()) if monitor else None
        self._monitor_due = time.monotonic()
        #: passes in a row that left ready tasks held by another transaction
        self._held_passes = 0
        self._pass_outage = Outage(logger, "runner pass")
        self._monitor_outage = Outage(logger, "monitor duties")
        #: the queues the last pass filled to their limit, with their low-water mark
        self._draining: dict[str, int] = {}
        self._drain_connection: Any = None
        #: the passes' threads, for the loop's life
        self._pools = PassPools.open(claimers)

    def step(self) -> float:
        """One pass, then the monitor's duties when their turn came; the
        seconds to wait before the next step (a wake-up may cut it short)."""
        report = self._pass()
        metrics.PASSES.inc()
        monitor = self.monitor
        if monitor is not None and time.monotonic() >= self._monitor_due:
            self._monitor_due = time.monotonic() + monitor.period.total_seconds()
            try:
                monitor_tick(
                    self.store,
                    self.clock(),
                    settings=monitor,
                    app=self.app,
                    workers=self.workers,
                    apply=self._apply,
                    index=self.index,
                )
            except SchedulerError as error:
                self._monitor_outage.failed(error)
                metrics.PASS_ERRORS.labels(stage="monitor").inc()
            else:
                self._monitor_outage.ok()
        if self.on_pass is not None:
            self.on_pass(report)
        if self.top_up:
            self._draining = {t.queue: low_water(t.limit or 0) for t in report.types if t.filled}
        wait = report.sleep_seconds(self.period)
        self._held_passes = self._held_passes + 1 if report.held else 0
        if report.held:
            wait = min(wait, held_wait(self._held_passes, self.period))
        if monitor is not None:
            wait = min(wait, max(0.0, self._monitor_due - time.monotonic()))
        return wait

    def _pass(self) -> PassReport:
        try:
            report = tick(
                self.store,
                self.app,
                self.clock(),
                types=self.types,
                priorities=self.priorities,
                workers=self.workers,
                claimers=self.claimers,
                order=self.order,
                index=self.index,
                pools=self._pools,
                slots=self.workers.slots if self.workers is not None else None,
            )
            if self.monitor is None:
                republish_unstarted(
                    self.store,
                    self.app,
                    self.clock(),
                    older_than=self.republish_after,
                    workers=self.workers,
                )
        except SchedulerError as error:
            # the database is down or refused: keep running, try again later
            self._pass_outage.failed(error)
            metrics.PASS_ERRORS.labels(stage="database").inc()
            return PassReport(now=self.clock(), errors=(str(error),), saturated=True)
        self._pass_outage.ok()
        return report

    def pause(self, waker: Waker, seconds: float, stop: threading.Event | None = None) -> None:
        """Wait up to ``seconds`` before the next step, or less: a wake-up
        (work ready), or, when the last pass filled queues to their limit,
        one of them drained to its low-water mark (their depths read every
        :data:`DRAIN_POLL` seconds, on RabbitMQ as on Redis): a worker with
        due work waiting never runs dry for want of a claim. Returns at once
        once ``stop`` is set."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not (stop and stop.is_set()):
            if not self._draining:
                waker.wait(left)
                return
            if waker.wait(min(left, DRAIN_POLL)):
                return
            if self._drained():
                return

    def _drained(self) -> bool:
        """Whether a queue the last pass filled is down to its low-water mark
        (False when the broker cannot tell: the period bounds the wait)."""
        try:
            if self._drain_connection is None:
                self._drain_connection = open_connection(self.app)
            depths = queue_depths(self.app, list(self._draining), connection=self._drain_connection)
        except BrokerError as error:
            logger.debug("cannot read the depths of the queues draining: %s", error)
            self._drop_drain_connection()
            return False
        low = [q for q, mark in self._draining.items() if depths.get(q, 0) <= mark]
        if low:
            metrics.TOP_UPS.inc()
            logger.debug("queue(s) %s down to their low-water mark: topping up", ", ".join(low))
        return bool(low)

    def _drop_drain_connection(self) -> None:
        if self._drain_connection is not None:
            with contextlib.suppress(Exception):
                self._drain_connection.release()
            self._drain_connection = None

    def close(self) -> None:
        """Give the monitor's lock back (when this loop took it), and stop
        the passes' threads."""
        self._drop_drain_connection()
        self._pools.close()
        if self.monitor is not None:
            release(self.store, self.monitor)


def run(steps: RunnerLoop, waker: Waker, *, stop: threading.Event) -> None:
    """Step after step of ``steps`` until ``stop`` is set; between steps,
    sleep until the next task is ready (at most the loop's period) or a
    wake-up (a new task, a task rescheduled soon) cuts the sleep short. The
    monitor's lock is given back when the loop stops."""
    logger.info(
        "runner started: types=%s priorities=%s period=%ss monitor=%s",
        ",".join(steps.types) if steps.types else "all",
        ",".join(steps.priorities) if steps.priorities else "all",
        steps.period,
        "on" if steps.monitor is not None else "off",
    )
    try:
        while not stop.is_set():
            wait = steps.step()
            if stop.is_set():
                break
            steps.pause(waker, wait, stop)
    finally:
        steps.close()
    logger.info("runner stopped")
