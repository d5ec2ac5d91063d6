"""Shared test helpers: waiting on a condition with a bound (tests never sleep a
fixed time), and cleaning up broker queues."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Return as soon as ``condition()`` is truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


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
