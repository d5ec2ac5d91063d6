"""The monitor's steal settings, published for the workers (self-fencing).

The monitor takes a run from its copy once the process running the body has
not renewed it for ``ping_timeout`` plus ``grace`` (the steal step). Each
pass of the monitor holding the lock writes those two settings in the
database (:meth:`SchedulerStore.publish_lease_terms`: one row, written only
when they change); every worker process reads them
(:mod:`swh_like_scheduler.worker.fencing`) and stops counting a body as its
run's owner once its renewals have not succeeded for
:func:`~swh_like_scheduler.domain.fencing.self_fence_bound` seconds, before
the monitor may take the run. The bound is so configured once, on the
monitor.

A failure to publish is logged (at most once a minute) and the pass goes on:
the workers keep what they read last.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from ..domain.exceptions import SchedulerError
from ..domain.fencing import LeaseTerms
from ..plumbing.quietlog import QuietLog
from ..store import SchedulerStore

logger = logging.getLogger(__name__)
_failed = QuietLog(logger, logging.WARNING)


def publish_terms(
    store: SchedulerStore, ping_timeout: timedelta, grace: timedelta, holder: str
) -> LeaseTerms | None:
    """Publish the monitor's ``ping_timeout`` and ``grace`` for the workers
    (``holder``: the monitor's identity); what is stored, or ``None`` when
    the database did not take them (logged)."""
    try:
        published = store.publish_lease_terms(ping_timeout=ping_timeout, grace=grace, holder=holder)
    except SchedulerError as error:
        _failed.log(
            "could not publish the monitor's steal settings for the workers (%s); "
            "they keep the ones they read last",
            error,
            key="publish",
        )
        return None
    _failed.ok("publish")
    return published


__all__ = ["publish_terms"]
