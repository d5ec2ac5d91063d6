"""Publishing again the messages of runs that never started.

Two kinds of ``scheduled`` runs have no message a worker will ever get:

- **orphans**: claimed, but their dispatch batch was never marked published:
  the runner died, or its broker failed, between claim and publish. No
  message exists; after ``orphaned_after`` (seconds: a claim is published
  within a second or two) they are published.
- **lost**: published, but the broker lost the message (data gone, queue
  purged). A run whose message waits in its queue looks exactly the same in
  the database, so only as many runs per queue as its depth cannot account
  for are sent again, the oldest first, once published ``older_than`` ago
  (a queue is first in, first out: the messages still in it are the newest).
  Runs a worker has prefetched are not in the depth either; a copy sent for
  one of them is refused at start by the guard (:mod:`..worker.guard`).

Either way the message goes out with the same Celery task id. Several
runners may do this at once: each run is taken by one of them (``SKIP
LOCKED``).
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from itertools import groupby

from celery import Celery

from ..broker import BrokerError, publish_batch, queue_depths
from ..domain.exceptions import SchedulerError
from ..domain.model import Claimed, TaskType
from ..plumbing.quietlog import QuietLog
from ..policy.blind import holds, is_blind
from ..store import SchedulerStore
from . import metrics
from .routing import LiveWorkers
from .serve import message_for

logger = logging.getLogger(__name__)
#: failures that repeat pass after pass during an outage: one line a minute per kind
_quiet = QuietLog(logger, logging.ERROR)
#: the runs held for a worker that sends no task events: one line a minute per worker
_blind = QuietLog(logger, logging.WARNING)

#: how long a claimed batch may stay unpublished before its runs count as
#: orphans (a claim's messages normally go out within a second or two)
ORPHANED_AFTER = timedelta(seconds=30)


def republish_unstarted(
    store: SchedulerStore,
    app: Celery,
    now: datetime,
    *,
    older_than: timedelta | None,
    orphaned_after: timedelta = ORPHANED_AFTER,
    workers: LiveWorkers | None = None,
    limit: int = 1000,
) -> int:
    """Publish the orphans claimed before ``now - orphaned_after`` and, with
    ``older_than``, the runs whose message was published before ``now -
    older_than`` and seems lost; returns how many messages were sent."""

    @functools.cache
    def types() -> dict[str, TaskType]:
        """The task types by name, read once per call, and only if needed."""
        return {t.type: t for t in store.get_task_types()}

    orphans = store.reclaim_unstarted_runs(
        now=now, claimed_before=now - orphaned_after, limit=limit
    )
    sent = _send(store, app, now, orphans, types, workers)
    if orphans:
        logger.warning(
            "published %d run(s) claimed more than %s ago whose messages were never sent",
            sent,
            orphaned_after,
        )
    if older_than is not None and len(orphans) < limit:
        lost = _reclaim_lost(store, app, now, older_than, types, limit - len(orphans))
        resent = _send(store, app, now, lost, types, workers)
        if lost:
            logger.warning(
                "re-published %d run(s) published more than %s ago that never started "
                "and are not in their queue",
                resent,
                older_than,
            )
        sent += resent
    return sent


def _reclaim_lost(
    store: SchedulerStore,
    app: Celery,
    now: datetime,
    older_than: timedelta,
    types: Callable[[], dict[str, TaskType]],
    limit: int,
) -> list[tuple[str, Claimed]]:
    """The oldest published runs that never started, per queue as many as
    the queue's depth leaves unaccounted for."""
    held = _held(store, types)
    counts = store.unstarted_run_counts(held=held or None)
    if not counts:
        return []
    by_queue: dict[str, list[str]] = defaultdict(list)
    for task_type in types().values():
        if task_type.type in counts:
            by_queue[task_type.effective_queue].append(task_type.type)
    try:
        depths = queue_depths(app, sorted(by_queue))
    except BrokerError as error:
        _quiet.log("cannot read queue depths; nothing re-published: %s", error, key="depth")
        metrics.PASS_ERRORS.labels(stage="republish").inc()
        return []
    taken: list[tuple[str, Claimed]] = []
    for queue, names in sorted(by_queue.items()):
        missing = sum(counts[t] for t in names) - depths[queue]
        if missing > 0 and len(taken) < limit:
            taken += store.reclaim_unstarted_runs(
                now=now,
                published_before=now - older_than,
                task_types=names,
                limit=min(missing, limit - len(taken)),
                held=held or None,
            )
    return taken


def _held(
    store: SchedulerStore, types: Callable[[], dict[str, TaskType]]
) -> dict[str, datetime | None]:
    """The runs not to send again, per type: those a live worker that sends
    no task events may have taken (:func:`..policy.blind.holds`); said once
    a minute per worker."""
    workers = store.get_workers()
    if not any(w.blind_since is not None for w in workers):
        return {}
    held = holds(workers, {t.type: t.backend_name for t in types().values()})
    for worker in workers:
        if is_blind(worker) and held:
            until = (
                f"dispatched before {worker.blind_until.isoformat()}"
                if worker.blind_until is not None
                else "dispatched since it began"
            )
            _blind.log(
                "worker %s takes tasks without sending task events (started without -E): "
                "runs of %s %s that never started are not published again while it is alive "
                "(they may have run there); start it with -E",
                worker.hostname,
                ", ".join(sorted(held)),
                until,
                key=worker.hostname,
            )
    return held


def _send(
    store: SchedulerStore,
    app: Celery,
    now: datetime,
    taken: Sequence[tuple[str, Claimed]],
    types: Callable[[], dict[str, TaskType]],
    workers: LiveWorkers | None,
) -> int:
    """Publish the messages of runs taken back, and mark their batch
    published; returns how many were sent."""
    if not taken:
        return 0
    messages = []
    for type_name, group in groupby(taken, key=lambda pair: pair[0]):
        task_type = types()[type_name]
        for _, claimed in group:
            if claimed.dont_run_on_nodes and (
                workers is None
                or workers.pick(task_type.effective_queue, claimed.dont_run_on_nodes) is None
            ):
                continue  # no allowed worker now: an orphan again soon
            messages.append(message_for(claimed, task_type, workers))
    try:
        published = publish_batch(app, messages) if messages else 0
    except BrokerError as error:
        # the batch stays unpublished: its runs are orphans, tried again
        _quiet.log(
            "re-publishing %d runs failed; retried later: %s", len(messages), error, key="publish"
        )
        metrics.PASS_ERRORS.labels(stage="republish").inc()
        return 0
    if len(messages) == len(taken):
        batches = {claimed.batch for _, claimed in taken if claimed.batch is not None}
        try:
            store.mark_published(batches, at=now)
        except SchedulerError as error:
            _quiet.log("could not record %d runs as published: %s", published, error, key="record")
    metrics.REPUBLISHED.inc(published)
    return published
