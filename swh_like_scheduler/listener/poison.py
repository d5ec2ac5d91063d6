"""Events that cannot be read: dropped, counted, logged at most once a while.

Anyone who can publish to the broker's event exchange can send the listener
anything. An event whose reading raises (an out-of-range number, a clock
that is not a number, a shape no Celery sends) is dropped alone: the rest of
its batch is applied, and the listener goes on. The log says how many were
dropped and shows the last one, at most once per :data:`LOG_EVERY` seconds,
so a flood of bad events cannot flood the log either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from . import metrics

logger = logging.getLogger(__name__)

#: seconds between two log lines about dropped events
LOG_EVERY = 10.0
#: longest shown part of a dropped event
SHOWN = 300

T = TypeVar("T")

_lock = threading.Lock()
_dropped = 0
_total = 0
_logged_at = -LOG_EVERY


def dropped_total() -> int:
    """How many events this process dropped so far."""
    return _total


def drop(
    event: Any, error: BaseException, *, reason: str = "malformed", now: float | None = None
) -> None:
    """Count ``event`` as dropped because of ``error`` (for ``reason``: see
    :mod:`.metrics`); log if it is time."""
    global _dropped, _total, _logged_at
    now = time.monotonic() if now is None else now
    metrics.dropped(reason)
    with _lock:
        _dropped += 1
        _total += 1
        if now - _logged_at < LOG_EVERY:
            return
        count, _dropped, _logged_at = _dropped, 0, now
    shown = repr(event)
    if len(shown) > SHOWN:
        shown = shown[:SHOWN] + "..."
    logger.warning(
        "dropped %d malformed event(s) in the last %.0f s; the last one (%s: %s): %s",
        count,
        LOG_EVERY,
        type(error).__name__,
        str(error)[:SHOWN],
        shown,
    )


def guarded(read: Callable[[Mapping[str, Any]], T | None], event: Any) -> T | None:
    """``read(event)``, or ``None`` (the event dropped) if it raises or the
    event is not a mapping."""
    if not isinstance(event, Mapping):
        drop(event, TypeError("an event is a mapping"), reason="not_an_event")
        return None
    try:
        return read(event)
    except Exception as error:  # any reading error: one event lost, not the listener
        drop(event, error)
        return None


__all__ = ["LOG_EVERY", "drop", "dropped_total", "guarded"]
