"""What the listener did with the events it received, counted and told.

Prometheus counters (served by ``start-listener --metrics-port``):

* ``swh_scheduler_listener_events_total{action}`` — events applied, by what
  applying them did (``started``, ``ended``, ``duplicate``, ``kept_open``,
  ``unknown_run``, ``ignored``, ``worker``);
* ``swh_scheduler_listener_events_dropped_total{reason}`` — events that
  changed nothing, by why: ``unknown_run`` (no run of ours has that id: a
  task sent by hand, or a run already deleted), ``malformed`` (a field out
  of range or of the wrong type), ``not_an_event`` (not a mapping with a
  type), ``undecodable`` (a message that is not JSON).

:class:`Summary` writes one line per interval with the same figures, so an
operator reading the log during an outage sees what came in and what was
dropped, without one line per event.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import Counter

if TYPE_CHECKING:  # the handler counts its drops here: no import at run time
    from .actions import BatchSummary

logger = logging.getLogger(__name__)

EVENTS = Counter(
    "swh_scheduler_listener_events", "Events applied, by what applying them did", ["action"]
)
DROPPED = Counter(
    "swh_scheduler_listener_events_dropped", "Events that changed nothing, by why", ["reason"]
)

#: the reason of events whose run is not ours
UNKNOWN_RUN = "unknown_run"

_dropped: Tally[str] = Tally()


def dropped(reason: str, count: int = 1) -> None:
    """Count ``count`` events dropped for ``reason``."""
    _dropped[reason] += count
    DROPPED.labels(reason=reason).inc(count)


def dropped_by_reason() -> dict[str, int]:
    """Events this process dropped so far, by reason."""
    return dict(_dropped)


def applied(summary: BatchSummary) -> None:
    """Count a written batch's events by action (unknown runs as dropped too)."""
    for action, count in summary.counts.items():
        EVENTS.labels(action=str(action)).inc(count)
    unknown = summary.counts.get(UNKNOWN_RUN, 0)  # type: ignore[call-overload]
    if unknown:
        dropped(UNKNOWN_RUN, unknown)


def _words(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items()) if n) or "none"


class Summary:
    """One log line per ``every`` seconds: the events received and applied
    (by action) and dropped (by reason) since the last line; nothing when
    nothing came."""

    def __init__(self, every: float, clock: Callable[[], float]) -> None:
        self.every, self._clock = every, clock
        self._at = clock()
        self._received = 0
        self._applied: dict[str, int] = {}
        # the drops of this process before this summary began are not its own
        self._dropped: dict[str, int] = dropped_by_reason()

    def tick(self, received: int, applied: BatchSummary) -> str | None:
        """Log (and return) the line if it is due and something happened."""
        now = self._clock()
        if self.every <= 0 or now - self._at < self.every:
            return None
        counts = {str(a): n for a, n in applied.counts.items()}
        drops = dropped_by_reason()
        new_applied = {k: n - self._applied.get(k, 0) for k, n in counts.items()}
        new_dropped = {k: n - self._dropped.get(k, 0) for k, n in drops.items()}
        new_received = received - self._received
        seconds = now - self._at
        self._at, self._received, self._applied, self._dropped = now, received, counts, drops
        if not new_received and not any(new_dropped.values()):
            return None
        line = (
            f"listener: {new_received} events received in {seconds:.0f} s; "
            f"applied: {_words(new_applied)}; dropped: {_words(new_dropped)}"
        )
        logger.info("%s", line)
        return line


__all__ = ["DROPPED", "EVENTS", "UNKNOWN_RUN", "Summary", "applied", "dropped", "dropped_by_reason"]
