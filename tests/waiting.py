"""Shared test helpers: waiting on a condition with a bound (tests never sleep a
fixed time), and cleaning up broker queues."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

#: how many times its bound a wait may take, when set (e.g. 3 on a shared
#: CI runner); else the machine's load per core, between 1 and MAX_PATIENCE
PATIENCE_ENV = "SWH_TEST_PATIENCE"
MAX_PATIENCE = 4.0


def patience() -> float:
    """The factor waits are stretched by: ``SWH_TEST_PATIENCE``, or the
    load average per core over the last minute (at least 1, at most
    :data:`MAX_PATIENCE`). A wait is for something that must happen; on a
    busy machine it happens later, and that is not the failure looked for."""
    given = os.environ.get(PATIENCE_ENV, "").strip()
    if given:
        return max(1.0, float(given))
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 1.0
    return min(MAX_PATIENCE, max(1.0, load))


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Return as soon as ``condition()`` is truthy; fail after ``timeout`` s
    stretched by :func:`patience`, with a message that says it timed out."""
    factor = patience()
    started = time.monotonic()
    deadline = started + timeout * factor
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    if condition():  # a last look: the wait may have been starved, not the event
        return
    stretched = f" ({timeout}s x {factor:.1f} for the machine's load)" if factor > 1 else ""
    waited = time.monotonic() - started
    raise AssertionError(f"timed out after {waited:.1f}s{stretched} waiting for {what}")


def delete_queues(app: Any, *queues: str) -> None:
    """Purge and delete test queues (a missing queue is fine)."""
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in queues:
            try:
                channel.queue_purge(queue)
                channel.queue_delete(queue)
            except Exception:  # the queue may not exist; AMQP closed the channel
                channel = conn.channel()
