"""Re-publishing runs whose message never led to a start.

A run stays ``scheduled`` with no worker ever starting it when its message
was lost: the broker went down between the claim and the publish, a queue
was purged, a broker lost its data. After ``older_than``, the run's message
is published again with the same Celery task id (so a copy that did arrive
is recognised as a duplicate). Several runners may do this at once: each
run is taken by one of them (``SKIP LOCKED``).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from itertools import groupby

from celery import Celery

from ..broker import BrokerError, publish_batch
from ..store import SchedulerStore
from . import metrics
from .dispatch import message_for
from .routing import LiveWorkers

logger = logging.getLogger(__name__)


def republish_unstarted(
    store: SchedulerStore,
    app: Celery,
    now: datetime,
    *,
    older_than: timedelta,
    workers: LiveWorkers | None = None,
    limit: int = 1000,
) -> int:
    """Publish again the messages of runs dispatched before ``now -
    older_than`` that never started; returns how many were published."""
    taken = store.reclaim_unstarted_runs(scheduled_before=now - older_than, now=now, limit=limit)
    if not taken:
        return 0
    types = {t.type: t for t in store.get_task_types()}
    messages = []
    for type_name, group in groupby(taken, key=lambda pair: pair[0]):
        task_type = types[type_name]
        for _, claimed in group:
            if claimed.dont_run_on_nodes and (
                workers is None
                or workers.pick(task_type.effective_queue, claimed.dont_run_on_nodes) is None
            ):
                continue  # no allowed worker now: it is taken again next time
            messages.append(message_for(claimed, task_type, workers))
    try:
        published = publish_batch(app, messages) if messages else 0
    except BrokerError as error:
        logger.error("re-publishing %d runs failed; retried later: %s", len(messages), error)
        metrics.PASS_ERRORS.labels(stage="republish").inc()
        return 0
    metrics.REPUBLISHED.inc(published)
    logger.warning("re-published %d runs that never started (older than %s)", published, older_than)
    return published
