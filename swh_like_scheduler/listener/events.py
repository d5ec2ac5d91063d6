"""Turning raw Celery task events into :class:`RunEvent` values.

A Celery event is a flat mapping: ``type`` (``task-started``, ...), ``uuid``
(the Celery task id, which is our run's ``backend_id``), ``hostname``,
``timestamp`` (the *sender's* ``time.time()``) and type-specific fields.
Parsing is pure: no store, no clock.

Timestamps must be the raw ones sent by the worker. Celery's own receiver
"localises" them by default (it shifts them by the difference between the
sender's and the receiver's UTC offsets), which moves an absolute instant;
:mod:`.consumer` reads events without that adjustment.

The ``result`` of ``task-succeeded`` is ``saferepr(return value)`` truncated to
``resultrepr_maxsize`` (1024 characters): it is parsed back with
:func:`ast.literal_eval` when it is a literal; otherwise a ``'status': '…'``
item is looked for, and failing that the text itself stands for the result
(a non-empty text is truthy, hence eventful).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from ..domain.exceptions import InvalidInput
from ..domain.model import RunStatus
from ..domain.records import WorkerSighting
from ..policy import classify_result


class EventKind(StrEnum):
    """What an event means for the run it names."""

    #: the worker began executing the run
    START = "start"
    #: the run ended with a final status
    END = "end"
    #: the run will be executed again under the same id (retry, cancellation by
    #: Celery on connection loss, requeue): nothing final is recorded
    AGAIN = "again"
    #: an event that says nothing the listener records
    NOTHING = "nothing"
    #: a visit of the origin-visit scheduler ended (no run: :mod:`..visits.events`)
    VISIT = "visit"


#: Celery task event types and their meaning. ``task-result`` is the event our
#: worker base class sends with the real (JSON) return value.
TASK_EVENT_KINDS: Mapping[str, EventKind] = {
    "task-sent": EventKind.NOTHING,
    "task-received": EventKind.NOTHING,
    "task-started": EventKind.START,
    "task-succeeded": EventKind.END,
    "task-result": EventKind.END,
    "task-failed": EventKind.END,
    "task-revoked": EventKind.END,
    "task-rejected": EventKind.END,
    "task-retried": EventKind.AGAIN,
    "task-cancelled": EventKind.AGAIN,
    "task-visit-status": EventKind.VISIT,
}

#: Longest error text kept in a run (exception reprs can be huge).
MAX_ERROR_LENGTH = 2000
#: Longest task id or worker name taken from an event (ours are 36 and a
#: host name); anything longer is not a run of ours.
MAX_NAME_LENGTH = 255
#: 9999-12-31T23:59:59Z: the last instant a datetime holds
_LAST_TIMESTAMP = 253_402_300_799
#: longest believable ``runtime`` (seconds): ten years
_LONGEST_RUNTIME = 10 * 366 * 86_400

#: the result repr of most runs (``{'status': 'eventful'}``): read without a parser
_STATUS_ONLY = re.compile(r"\{'status': '([a-z_]+)'\}")
_STATUS_ITEM = re.compile(r"""['"]status['"]\s*:\s*['"]([a-z_]+)['"]""")


@dataclass(frozen=True)
class RunEvent:
    """What one event says about one run, in the store's terms.

    ``at`` is the event's own instant (aware UTC). For an end, ``status`` is
    the final run status, ``started`` the start deduced from the event's
    ``runtime`` (``None`` when the event does not tell), ``result`` the
    worker's return value (JSON-able) and ``error`` the failure's text.
    """

    kind: EventKind
    backend_id: str
    at: datetime
    event_type: str = ""
    worker: str | None = None
    status: RunStatus | None = None
    started: datetime | None = None
    result: Any = None
    error: str | None = None


def event_time(event: Mapping[str, Any]) -> datetime:
    """The event's ``timestamp`` (epoch seconds) as an aware UTC datetime.

    Raises InvalidInput('timestamp') when the event has none usable.
    """
    value = event.get("timestamp")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput("timestamp", f"{value!r} is not an epoch timestamp")
    if not 0 <= value <= _LAST_TIMESTAMP:  # NaN and infinities too
        raise InvalidInput("timestamp", f"{value!r} is not an epoch timestamp of years 1970-9999")
    return datetime.fromtimestamp(float(value), tz=UTC)


def parse_result_repr(text: Any) -> Any:
    """The return value a ``task-succeeded`` ``result`` stands for.

    A non-string is returned as it is. A literal (``{'status': 'eventful'}``,
    ``None``, ``True``, ``'x'``) is parsed; a truncated or non-literal repr
    gives ``{'status': …}`` when it shows a status item, else the text itself.
    """
    if not isinstance(text, str):
        return text
    only = _STATUS_ONLY.fullmatch(text)
    if only is not None:
        return {"status": only.group(1)}
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    match = _STATUS_ITEM.search(text)
    if match is not None:
        return {"status": match.group(1)}
    return text


#: values JSON takes as they are (exactly these types: no subclass, no float)
_PLAIN = frozenset({str, int, bool, type(None)})


def jsonable(value: Any) -> Any:
    """``value`` if it can be stored as JSON, else its ``repr`` (sets, bytes, …)."""
    if type(value) in _PLAIN:
        return value
    if type(value) is dict and all(  # most results: {'status': 'eventful'}
        type(k) is str and type(v) in _PLAIN for k, v in value.items()
    ):
        return value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def status_of_result(result: Any) -> tuple[RunStatus, str | None]:
    """The run status a return value gives, and an error text when the value
    is a mapping with a status the scheduler does not know (a worker bug)."""
    try:
        return classify_result(result), None
    except InvalidInput as error:
        return RunStatus.FAILED, f"the task returned an invalid result: {error}"


#: how Celery words the exceptions of its time limits in ``task-failed``
_TIME_LIMIT_ERRORS = ("SoftTimeLimitExceeded(", "TimeLimitExceeded(")


def error_text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    text = value if isinstance(value, str) else repr(value)
    return text[:MAX_ERROR_LENGTH]


def _runtime_start(event: Mapping[str, Any], at: datetime) -> datetime | None:
    runtime = event.get("runtime")
    if isinstance(runtime, bool) or not isinstance(runtime, int | float):
        return None
    if not 0 <= runtime <= _LONGEST_RUNTIME:  # NaN and infinities too
        return None
    try:
        return at - timedelta(seconds=float(runtime))
    except OverflowError:  # before year 1
        return None


def _end(event: Mapping[str, Any], event_type: str) -> dict[str, Any]:
    """The end-specific fields of a :class:`RunEvent`."""
    if event_type in ("task-succeeded", "task-result"):
        raw = event.get("result")
        value = raw if event_type == "task-result" else parse_result_repr(raw)
        status, error = status_of_result(value)
        return {"status": status, "result": jsonable(value), "error": error}
    if event_type == "task-failed":
        error = error_text(event.get("exception"))
        if error is not None and error.startswith(_TIME_LIMIT_ERRORS):
            limit = "soft" if error.startswith("SoftTimeLimitExceeded") else "hard"
            why = f"stopped by its {limit} time limit (the type's max_allowed_duration): {error}"
            return {"status": RunStatus.TIMED_OUT, "error": why[:MAX_ERROR_LENGTH]}
        return {"status": RunStatus.FAILED, "error": error}
    if event_type == "task-revoked":
        # expired: the message outlived its expiry and never ran (nobody asked
        # for it to stop); otherwise a client revoked it, whether or not it was
        # running (terminated): the run was cancelled.
        if event.get("expired"):
            return {"status": RunStatus.LOST, "error": "the message expired before it ran"}
        reason = "revoked and terminated" if event.get("terminated") else "revoked"
        return {"status": RunStatus.CANCELLED, "error": reason}
    # task-rejected without requeue: the worker dropped the message
    return {"status": RunStatus.LOST, "error": "rejected by the worker"}


def parse_event(event: Mapping[str, Any]) -> RunEvent | None:
    """The :class:`RunEvent` of a Celery task event, or ``None`` when the
    event does not concern a run (worker events, unknown types, no ``uuid``,
    no usable timestamp) or says nothing the listener records.

    A ``task-rejected`` event with ``requeue`` true means the message goes back
    to the queue: the run will be tried again (:attr:`EventKind.AGAIN`).
    """
    event_type = event.get("type")
    backend_id = event.get("uuid")
    if not isinstance(event_type, str) or not isinstance(backend_id, str):
        return None
    if not 0 < len(backend_id) <= MAX_NAME_LENGTH:
        return None
    kind = TASK_EVENT_KINDS.get(event_type)
    if kind is None or kind in (EventKind.NOTHING, EventKind.VISIT):
        return None
    try:
        at = event_time(event)
    except InvalidInput:
        return None
    hostname = event.get("hostname")
    worker = (
        hostname if isinstance(hostname, str) and 0 < len(hostname) <= MAX_NAME_LENGTH else None
    )
    if event_type == "task-rejected" and event.get("requeue"):
        kind = EventKind.AGAIN
    if kind is not EventKind.END:
        return RunEvent(kind, backend_id, at, event_type, worker)
    return RunEvent(
        kind,
        backend_id,
        at,
        event_type,
        worker,
        started=_runtime_start(event, at),
        **_end(event, event_type),
    )


#: Celery worker event types and whether they say the worker is online.
WORKER_EVENT_ONLINE: Mapping[str, bool] = {
    "worker-online": True,
    "worker-heartbeat": True,
    "worker-offline": False,
}


def parse_worker_event(event: Mapping[str, Any]) -> WorkerSighting | None:
    """The :class:`WorkerSighting` of a Celery worker event
    (``worker-heartbeat``, ``worker-online``, ``worker-offline``): its
    ``hostname`` (``name@node``), its own ``timestamp``, ``freq`` (the
    heartbeat period, seconds), ``pid`` (its main process) and
    ``processed`` (the tasks it began since it started). ``None`` for
    any other event, or one without a hostname or a usable timestamp."""
    event_type = event.get("type")
    online = WORKER_EVENT_ONLINE.get(event_type) if isinstance(event_type, str) else None
    hostname = event.get("hostname")
    if online is None or not isinstance(hostname, str) or not 0 < len(hostname) <= MAX_NAME_LENGTH:
        return None
    try:
        at = event_time(event)
    except InvalidInput:
        return None
    freq = event.get("freq")
    if isinstance(freq, bool) or not isinstance(freq, int | float) or not 0 < freq < 86_400:
        freq = None
    pid = event.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31:
        pid = None
    processed = event.get("processed")
    if isinstance(processed, bool) or not isinstance(processed, int) or processed < 0:
        processed = None
    return WorkerSighting(hostname, at, online, float(freq) if freq else None, pid, processed)
