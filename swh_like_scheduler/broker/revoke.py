"""Revoking the messages of cancelled runs (Celery's ``revoke`` broadcast).

A revoke reaches the workers that are alive now: they drop the message when
it comes (``task-revoked``). A worker started later, or one that missed the
broadcast, still receives it, and the start guard refuses it there (the run
ended ``cancelled``): the revoke saves the delivery, the guard is the
promise.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from celery import Celery

logger = logging.getLogger(__name__)

#: seconds to wait for the broker before giving up on a revoke
CONNECT_TIMEOUT = 5.0


def revoke_runs(app: Celery, backend_ids: Sequence[str]) -> str | None:
    """Broadcast a revoke of ``backend_ids``; the error text if the broker
    could not be reached (nothing is raised: the guard covers it)."""
    if not backend_ids:
        return None
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=CONNECT_TIMEOUT)
            app.control.revoke(list(backend_ids), connection=conn)
    except Exception as error:  # kombu and driver errors alike: best effort
        logger.warning("could not revoke %d run(s): %s", len(backend_ids), error)
        return str(error) or type(error).__name__
    return None


__all__ = ["revoke_runs"]
