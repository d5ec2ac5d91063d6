"""One runner pass: turn ready task rows into Celery messages.

For each task type: capacity = ``max_queue_length`` - the broker queue's
current depth; claim up to that many ready tasks in priority-then-deadline
order (their runs are created in the same transaction); publish them with
the run's ``backend_id`` as Celery task id. A pass never claims for a queue
whose depth it could not read, so a broker outage leaves tasks waiting
rather than claimed; if publishing fails after a claim committed, the runs
stay ``scheduled`` and the monitor re-publishes them with the same id.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from celery import Celery

from ..broker import BrokerError, Message, PublishError, publish_batch, queue_depths
from ..exceptions import SchedulerError
from ..model import Claimed, Priority, TaskType
from ..store import SchedulerStore
from . import metrics

logger = logging.getLogger(__name__)

#: Tasks claimed (and published) per transaction: small enough that a crash
#: between claim and publish leaves few runs to re-publish, large enough to
#: amortise round trips.
CLAIM_CHUNK = 2000
#: Capacity of a type without ``max_queue_length``, per pass.
UNBOUNDED_PASS_LIMIT = 10_000


@dataclass(frozen=True)
class TypePass:
    """What one pass did for one task type."""

    task_type: str
    queue: str
    depth: int | None
    capacity: int
    claimed: int = 0
    published: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class PassReport:
    """What one pass did, and when the next one has work."""

    now: datetime
    types: tuple[TypePass, ...] = ()
    #: earliest next_run still waiting among the served types (None: none)
    next_ready: datetime | None = None
    #: a type was cut short by its capacity or an error
    saturated: bool = False
    errors: tuple[str, ...] = field(default=())

    @property
    def claimed(self) -> int:
        return sum(t.claimed for t in self.types)

    @property
    def published(self) -> int:
        return sum(t.published for t in self.types)

    def sleep_seconds(self, period: float) -> float:
        """How long to wait before the next pass: until the next task is
        ready, at most ``period``; a full ``period`` when saturated or failing
        (the queue must drain, or the broker come back)."""
        if self.saturated or self.errors or self.next_ready is None:
            return period
        return max(0.0, min(period, (self.next_ready - self.now).total_seconds()))


def message_for(claimed: Claimed, task_type: TaskType) -> Message:
    return Message(
        task_id=claimed.run.backend_id,
        task_name=task_type.backend_name,
        queue=task_type.effective_queue,
        args=tuple(claimed.task.args),
        kwargs=dict(claimed.task.kwargs),
    )


def capacity_of(task_type: TaskType, depth: int) -> int:
    if task_type.max_queue_length is None:
        return UNBOUNDED_PASS_LIMIT
    return max(0, task_type.max_queue_length - depth)


def tick(
    store: SchedulerStore,
    app: Celery,
    now: datetime,
    *,
    types: Sequence[str] | None = None,
    priorities: Sequence[Priority] | None = None,
    connection: Any = None,
) -> PassReport:
    """One pass over the task types named in ``types`` (default: all).

    Types with no ready task are skipped without touching the broker, so an
    idle pass costs one indexed query per type."""
    task_types = [t for t in store.get_task_types() if types is None or t.type in types]
    if types is not None:
        for name in sorted(set(types) - {t.type for t in task_types}):
            logger.warning("task type %s is not registered; it is skipped", name)
    upcoming = {t.type: store.next_ready_time(t.type, priorities=priorities) for t in task_types}
    due = [t for t in task_types if (ready := upcoming[t.type]) is not None and ready <= now]
    later = [ready for ready in upcoming.values() if ready is not None and ready > now]
    if not due:
        return PassReport(now=now, next_ready=min(later, default=None))
    try:
        depths = queue_depths(app, sorted({t.effective_queue for t in due}), connection=connection)
    except BrokerError as error:
        logger.error("cannot read queue depths; nothing is claimed this pass: %s", error)
        metrics.PASS_ERRORS.labels(stage="depth").inc()
        failed = tuple(TypePass(t.type, t.effective_queue, None, 0, error=str(error)) for t in due)
        return PassReport(now=now, types=failed, errors=(str(error),), saturated=True)
    reports = [
        _serve_type(store, app, t, depths[t.effective_queue], now, priorities, connection)
        for t in due
    ]
    errors = tuple(r.error for r in reports if r.error)
    saturated = any(r.error or r.claimed >= r.capacity for r in reports)
    remaining = [
        ready
        for t in due
        if (ready := store.next_ready_time(t.type, priorities=priorities)) is not None
    ]
    return PassReport(
        now=now,
        types=tuple(reports),
        next_ready=min([*later, *remaining], default=None),
        saturated=saturated,
        errors=errors,
    )


def _serve_type(
    store: SchedulerStore,
    app: Celery,
    task_type: TaskType,
    depth: int,
    now: datetime,
    priorities: Sequence[Priority] | None,
    connection: Any,
) -> TypePass:
    started = time.perf_counter()
    capacity = capacity_of(task_type, depth)
    claimed = published = 0
    error: str | None = None
    while claimed < capacity:
        want = min(CLAIM_CHUNK, capacity - claimed)
        try:
            batch = store.claim_ready_tasks(
                task_type.type, now=now, limit=want, priorities=priorities
            )
        except SchedulerError as exc:
            error = f"claim failed: {exc}"
            metrics.PASS_ERRORS.labels(stage="claim").inc()
            break
        claimed += len(batch)
        if batch:
            try:
                published += publish_batch(
                    app, [message_for(c, task_type) for c in batch], connection=connection
                )
            except PublishError as exc:
                error = f"publish failed; {len(batch)} runs stay scheduled: {exc}"
                metrics.PASS_ERRORS.labels(stage="publish").inc()
                break
        if len(batch) < want:
            break
    seconds = time.perf_counter() - started
    metrics.record_type_pass(task_type.type, depth, claimed, published, seconds)
    log = logger.error if error else logger.info
    log(
        "type=%s queue=%s depth=%d capacity=%d claimed=%d published=%d time=%.3fs%s",
        task_type.type,
        task_type.effective_queue,
        depth,
        capacity,
        claimed,
        published,
        seconds,
        f" error={error}" if error else "",
    )
    return TypePass(
        task_type.type,
        task_type.effective_queue,
        depth,
        capacity,
        claimed,
        published,
        seconds,
        error,
    )
