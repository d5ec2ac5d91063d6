"""The Celery base class of our task types: it reports the real return value.

Celery's ``task-succeeded`` event carries ``saferepr(return value)`` cut at
``resultrepr_maxsize`` (1024 characters): the listener reads the outcome back
from that text, which fails when the value is long (a ``status`` item past the
cut is lost; what is left is a non-empty text, hence *eventful*). After the
body returns, :class:`ResultEventTask` therefore sends a ``task-result`` event
with the value itself, before Celery's own ``task-succeeded``; the listener
records whichever end event comes first and ignores the other
(:mod:`.listener.handler`). A value that ``task-succeeded`` carries whole
(its repr is shorter than the cut and reads back as the same value, as
``{"status": "eventful"}`` does) needs no second event: none is sent, which
spares the worker a publish and the listener an event per run::

    @shared_task(base=ResultEventTask, bind=True, name="...")
    def check(self, url): ...

Fields: ``uuid`` (the Celery task id, our run's ``backend_id``), ``result``,
``runtime`` (seconds in the body), plus the usual ``hostname``/``timestamp``.
A value whose JSON form is longer than :attr:`ResultEventTask.result_event_maxsize`
is replaced by ``{"status": <its status>, "truncated": true}``, and a value that
is not JSON by ``{"status": <its status>, "repr": "..."}`` (see
:func:`event_result`): the event stays small and the outcome right.

The event is sent only when the worker sends task events (``-E``, the
``worker_send_task_events`` setting, or ``enable_events`` sent by remote
control: seen in the worker's main process only, so a ``prefork`` child
follows ``-E``) and the task's ``send_events`` is true; never when the body
raised, and never for a delivery that did not run the body (a refused lease).
A failure to send is logged, not raised: the ``task-succeeded`` event remains.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import threading
import time
import weakref
from typing import Any

from celery import Task
from celery.signals import worker_init
from celery.utils.saferepr import saferepr

from ..domain.exceptions import InvalidInput
from ..listener.events import jsonable
from ..plumbing.kombu_redis import install as install_kombu_patch
from ..policy import classify_result

logger = logging.getLogger(__name__)

#: The event type the listener reads the real return value from.
RESULT_EVENT = "task-result"

#: Worker controllers of this process by hostname, with the pid that made them
#: (a prefork child holds a copy whose consumer it does not run).
_workers: dict[str, tuple[int, weakref.ref[Any]]] = {}
_workers_lock = threading.Lock()


@worker_init.connect
def _remember_worker(sender: Any = None, **_: Any) -> None:
    # a worker of any app whose tasks use the platform's base class keeps
    # running when its Redis broker goes away (the platform's own apps get
    # it from make_app): plumbing.kombu_redis
    install_kombu_patch()
    hostname = getattr(sender, "hostname", None)
    if isinstance(hostname, str):
        with _workers_lock:
            _workers[hostname] = (os.getpid(), weakref.ref(sender))


def _worker_of(task: Task) -> tuple[Any, bool]:
    """The worker controller executing ``task`` (``None`` if unknown) and
    whether this process is the one running its consumer."""
    hostname = task.request.hostname
    with _workers_lock:
        found = _workers.get(hostname) if isinstance(hostname, str) else None
    if found is None:
        return None, False
    return found[1](), found[0] == os.getpid()


def main_pid(task: Task) -> int:
    """The process id of the worker's main process executing ``task`` (the
    ``pid`` of its events): its pool's processes are its children."""
    hostname = task.request.hostname
    with _workers_lock:
        found = _workers.get(hostname) if isinstance(hostname, str) else None
    return found[0] if found is not None else os.getpid()


def _live_dispatcher(worker: Any) -> Any:
    consumer = getattr(worker, "consumer", None)
    return getattr(consumer, "event_dispatcher", None)


def _dispatcher_sends_task_events(dispatcher: Any) -> bool:
    groups = dispatcher.groups
    return bool(dispatcher.enabled) and (not groups or "task" in groups)


def task_events_enabled(task: Task) -> bool:
    """Whether the worker executing ``task`` now sends task events."""
    if not getattr(task, "send_events", True):
        return False
    worker, main_process = _worker_of(task)
    if worker is None:
        return bool(task.app.conf.worker_send_task_events)
    dispatcher = _live_dispatcher(worker)
    if main_process and dispatcher is not None:
        # the live state: follows enable_events / disable_events
        return _dispatcher_sends_task_events(dispatcher)
    return bool(getattr(worker, "task_events", False))


def event_result(value: Any, maxsize: int) -> Any:
    """What a ``task-result`` event carries for the return value ``value``:
    the value itself when it is JSON of at most ``maxsize`` characters, else
    a mapping with the status the value stands for and ``truncated: true``
    (too long) or its ``repr`` (not JSON: sets, bytes, dates, ...)."""
    try:
        size = len(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        size = None
    if size is not None and size <= maxsize:
        return value
    try:
        status: Any = classify_result(value).value
    except InvalidInput:  # a mapping with an unknown status: the listener says so
        status = jsonable(value["status"])
    if size is None:
        return {"status": status, "repr": saferepr(value, maxlen=min(maxsize, 2000))}
    return {"status": status, "truncated": True}


#: values whose ``saferepr`` is their ``repr``, which reads back as an equal value
_SCALARS = (int, bool, type(None))


def _plain_scalar(value: Any) -> bool:
    if type(value) is str:  # saferepr does not escape: no quote, backslash or control
        return value.isprintable() and "'" not in value and "\\" not in value
    return type(value) in _SCALARS


def _plain(value: Any) -> bool:
    """A plain scalar (:func:`_plain_scalar`), or a mapping of plain texts to
    plain scalars (``{"status": "eventful"}``)."""
    if type(value) is dict:
        return all(
            type(k) is str and _plain_scalar(k) and _plain_scalar(v) for k, v in value.items()
        )
    return _plain_scalar(value)


def carried_whole(value: Any, maxsize: int) -> bool:
    """Whether Celery's ``task-succeeded`` carries ``value`` whole: its
    ``saferepr`` is not cut at ``maxsize`` and reads back as an equal value
    (what the listener does with it)."""
    if _plain(value):  # the common case: its repr is its saferepr, read back as equal
        return len(repr(value)) < maxsize
    text = saferepr(value, maxlen=maxsize)
    if len(text) >= maxsize:
        return False
    try:
        return bool(ast.literal_eval(text) == value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


class ResultEventTask(Task):
    """Celery base class that sends ``task-result`` (module doc)."""

    #: longest JSON text of a return value sent as it is
    result_event_maxsize: int = 64 * 1024

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.request.id is None or self.request.called_directly:
            return super().__call__(*args, **kwargs)
        started = time.monotonic()
        result = self.run(*args, **kwargs)
        self.body_returned()
        self.send_result_event(result, runtime=time.monotonic() - started)
        return result

    def body_returned(self) -> None:
        """Called when the body has returned, before its success is reported
        (the ``task-result`` event, then Celery's own): raising here reports
        that exception instead. Nothing by default."""

    def send_result_event(self, result: Any, *, runtime: float | None = None) -> None:
        """Send ``task-result`` for the current request (when events are on).

        In the worker's main process (``solo`` and ``threads`` pools) the
        event goes through the worker's own event dispatcher, the channel
        Celery's ``task-succeeded`` takes next: the broker keeps them in
        order. A ``prefork`` child publishes it on a connection of its own
        before handing the return value to its parent, which then sends
        ``task-succeeded``: on RabbitMQ with a publisher confirm (two
        connections are two queues into the broker; without the confirm a
        busy broker may route the parent's event first, and the listener
        would read the outcome from its cut text), on Redis the PUBLISH
        has been done when it returns.
        """
        if self.request.id is None or not task_events_enabled(self):
            return
        if carried_whole(result, self.resultrepr_maxsize):
            return
        fields: dict[str, Any] = {"result": event_result(result, self.result_event_maxsize)}
        if runtime is not None:
            fields["runtime"] = runtime
        send_task_event(self, RESULT_EVENT, fields)  # (the task-succeeded event remains)


def send_task_event(task: Task, event_type: str, fields: dict[str, Any]) -> bool:
    """Send ``event_type`` for ``task``'s current request: through the
    worker's own dispatcher in its main process (in order with Celery's
    own events), with ``task.send_event`` in a pool's child. A failure is
    logged, not raised; whether it was sent."""
    worker, main_process = _worker_of(task)
    dispatcher = _live_dispatcher(worker) if main_process else None
    try:
        if dispatcher is not None:
            dispatcher.send(event_type, uuid=task.request.id, **fields)
        elif worker is not None:  # a pool's child: see send_result_event
            _send_confirmed(task, event_type, fields)
        else:
            task.send_event(event_type, **fields)
    except Exception:
        logger.warning(
            "%s %s: could not send %s", task.name, task.request.id, event_type, exc_info=True
        )
        return False
    return True


#: a pool child's own event dispatcher on RabbitMQ, on a connection with
#: publisher confirms, by (process id, worker hostname); ``None``: the
#: broker is not RabbitMQ (Celery's own ``send_event`` is used)
_confirmed: dict[tuple[int, str], Any] = {}


def _send_confirmed(task: Task, event_type: str, fields: dict[str, Any]) -> None:
    """Send ``event_type`` from a pool's child so that the broker has routed
    it when this returns (RabbitMQ: a publisher confirm)."""
    key = (os.getpid(), str(task.request.hostname))
    if key not in _confirmed:
        connection = task.app.connection_for_write(
            heartbeat=0, transport_options={"confirm_publish": True}
        )
        if connection.transport.driver_type != "amqp":
            connection.release()
            _confirmed[key] = None
        else:
            _confirmed[key] = task.app.events.Dispatcher(
                connection, hostname=key[1], enabled=True, buffer_while_offline=False
            )
    dispatcher = _confirmed[key]
    if dispatcher is None:
        task.send_event(event_type, **fields)
        return
    try:
        dispatcher.send(event_type, uuid=task.request.id, **fields)
    except Exception:
        # a connection lost meanwhile: a new one for the next event
        _confirmed.pop(key, None)
        with contextlib.suppress(Exception):
            dispatcher.connection.release()
        raise


__all__ = [
    "RESULT_EVENT",
    "ResultEventTask",
    "carried_whole",
    "event_result",
    "send_task_event",
    "task_events_enabled",
]
