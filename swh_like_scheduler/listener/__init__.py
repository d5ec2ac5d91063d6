"""The listener: Celery events (and the result backend) into run history.

* :mod:`.events` — raw Celery task events parsed into :class:`RunEvent` (pure);
* :mod:`.handler` — applying them to the store, each outcome exactly once;
* :mod:`.consumer` — the broker consumer (durable queue on AMQP), batched writes;
* :mod:`.names` — the event queue's name, the installation's by default;
* :mod:`.catchup` — recording runs whose events were missed (Redis) from the
  result backend.

Nothing here builds a Celery app or reads the environment: callers pass them.
"""

from .actions import Action, BatchSummary, HandleResult
from .catchup import CatchUpReport, backend_event, catch_up, open_runs
from .consumer import (
    Listener,
    ListenerOptions,
    ListenerReceiver,
    ListenerStats,
    drain,
    listen,
)
from .events import EventKind, RunEvent, event_time, parse_event, parse_result_repr
from .handler import (
    EventHandler,
    handle_event,
    handle_events,
)
from .names import LEGACY_QUEUE_NAME, event_queue_name

__all__ = [
    "LEGACY_QUEUE_NAME",
    "Action",
    "BatchSummary",
    "CatchUpReport",
    "EventHandler",
    "EventKind",
    "HandleResult",
    "Listener",
    "ListenerOptions",
    "ListenerReceiver",
    "ListenerStats",
    "RunEvent",
    "backend_event",
    "catch_up",
    "drain",
    "event_queue_name",
    "event_time",
    "handle_event",
    "handle_events",
    "listen",
    "open_runs",
    "parse_event",
    "parse_result_repr",
]
