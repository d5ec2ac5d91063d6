"""The listener's consumer: Celery task events in, batched store writes out.

Events are read with a subclass of Celery's
:class:`~celery.events.receiver.EventReceiver` on one broker connection and
buffered; a batch is applied (:class:`~.handler.EventHandler`) when it holds
the batch size's events or its oldest event waited ``batch_wait`` seconds.
The batch size is ``batch_size`` while events trickle in and grows (doubling
up to ``max_batch_size``) while they queue up: each batch that filled up
before ``batch_wait`` doubles the next one (fewer statements and commits per
event), one written because its oldest event waited brings it back
(:func:`next_batch_size`). A message body is read once, as plain JSON when
it is (:func:`decode_body`); Celery's receiver machinery (its Lamport clock,
timestamp localising) is not used.

Durability depends on the broker:

* **RabbitMQ (AMQP)**: the listener reads from a *durable, named* queue bound
  to the ``celeryev`` topic exchange (only the routing keys of the events it
  records, :data:`RECORDED_ROUTING_KEYS`), with no message TTL and no expiry
  (Celery's defaults — 5 s TTL, 60 s expiry, exclusive — would drop events
  while no listener runs). Messages are acknowledged only after their batch
  was committed, so events published while the listener is stopped, or
  delivered but not yet applied when it crashes, are applied after it
  restarts. Several listeners using the same queue name share the events;
  different names each receive every event. The default name is the
  installation's (:mod:`.names`): two installations on one vhost never
  share a queue. Events are published transient
  by Celery: they survive a listener restart, not a broker restart.
* **Redis**: events are a fanout (PUBLISH/SUBSCRIBE): only a connected
  listener receives them, and nothing is acknowledged. Events sent while no
  listener runs are lost; :func:`~.catchup.catch_up` records those runs from
  the result backend.

The loop is a thin shell around single steps (:meth:`Listener.step`,
:meth:`Listener.flush`), stopped by a :class:`threading.Event`. A broker
outage closes the session and a new one is opened after ``retry_delay``; a
store outage keeps the batch (unacknowledged) and retries it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from celery import Celery
from celery.events.receiver import EventReceiver
from kombu import Connection, Consumer, Queue, binding
from kombu.exceptions import OperationalError

from ..broker.connection import connect
from ..domain.exceptions import SchedulerError
from ..plumbing.outage import Outage
from ..policy import RandomSource
from ..store import SchedulerStore
from . import metrics, poison
from .actions import BatchSummary
from .events import TASK_EVENT_KINDS, WORKER_EVENT_ONLINE, EventKind
from .handler import EventHandler
from .names import event_queue_name, legacy_queue_left, legacy_queue_warning

logger = logging.getLogger(__name__)

#: Every event on the ``celeryev`` exchange.
ALL_EVENTS: tuple[str, ...] = ("#",)

#: The routing keys of the events the listener records. Celery publishes an
#: event with its type as key, ``-`` turned into ``.`` (``task.started``);
#: a worker running an event loop buffers its task events and publishes them
#: as lists under ``task.multi`` (then ``task-received`` comes along: it is
#: parsed and ignored). ``task-sent`` and ``task-received`` sent one by one
#: (a client with ``task_send_sent_event``, a worker without event loop) are
#: not delivered at all.
RECORDED_ROUTING_KEYS: tuple[str, ...] = (
    *(t.replace("-", ".") for t, kind in TASK_EVENT_KINDS.items() if kind is not EventKind.NOTHING),
    *(t.replace("-", ".") for t in WORKER_EVENT_ONLINE),
    "task.multi",
    "worker.multi",
)


@dataclass(frozen=True)
class ListenerOptions:
    """How the listener reads and batches events.

    ``queue_name`` ``None`` (the default) is the installation's queue
    (:func:`~.names.event_queue_name` of the store's installation id), read
    by the :class:`Listener` when it connects.
    ``durable`` ``None`` means durable on AMQP brokers and not elsewhere.
    ``max_batch_size`` (``None``: four times ``batch_size``) bounds the
    batches applied while events queue up (:func:`next_batch_size`).
    ``queue_expires`` (seconds) lets the broker delete the durable queue after
    it went unused that long (``None``: never; set it to bound the growth of
    the queue of a listener taken out of service). ``lanes`` is the number of
    threads writing a batch (``None``: 4 when the store has concurrent writers,
    else 1). ``idle_timeout`` ends :func:`drain` once no event came for that long.

    ``routing_keys`` are the keys the queue is bound with on AMQP brokers
    (default :data:`RECORDED_ROUTING_KEYS`; :data:`ALL_EVENTS` for every
    event). When they do not hold ``#``, a ``#`` binding left on the durable
    queue by an older version (which bound every event) is removed. On
    Redis events are a fanout whose subscription takes one pattern: a queue
    given several keys there subscribes to every event (those the listener
    does not record are parsed and ignored, as on a ``#`` binding).
    """

    queue_name: str | None = None
    batch_size: int = 500
    max_batch_size: int | None = None
    batch_wait: float = 0.2
    poll_interval: float = 0.25
    durable: bool | None = None
    queue_expires: float | None = None
    routing_keys: tuple[str, ...] = RECORDED_ROUTING_KEYS
    lanes: int | None = None
    retry_delay: float = 2.0
    idle_timeout: float = 1.0
    wakeup_workers: bool = True
    #: seconds between two summary lines in the log (0: none)
    summary_every: float = 60.0

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size {self.batch_size} must be at least 1")
        if self.queue_name is not None and not self.queue_name:
            raise ValueError("queue_name must not be empty")
        if not self.routing_keys or not all(self.routing_keys):
            raise ValueError(f"routing_keys {self.routing_keys!r} must be non-empty keys")
        if self.max_batch_size is not None and self.max_batch_size < self.batch_size:
            raise ValueError(
                f"max_batch_size {self.max_batch_size} is smaller than batch_size {self.batch_size}"
            )

    @property
    def largest_batch(self) -> int:
        """The most events a batch holds (``max_batch_size`` or its default)."""
        return self.max_batch_size if self.max_batch_size is not None else 4 * self.batch_size


def next_batch_size(current: int, *, full: bool, smallest: int, largest: int) -> int:
    """The size of the next batch after one of ``current`` events was
    written: twice as large (at most ``largest``) when the batch ``full``
    filled up (events are queuing up: fewer, larger batches cost fewer
    statements and commits per event), back to ``smallest`` when it was
    written because its oldest event waited ``batch_wait`` (events trickle
    in: the latency stays ``batch_wait`` at most either way)."""
    if not full:
        return smallest
    return max(smallest, min(largest, 2 * current))


def decode_body(message: Any) -> Any:
    """The body of an event message, read once: plain JSON (what Celery's
    ``json`` event serializer sends) is parsed directly; anything else
    (another serializer, compression, kombu's tagged values such as a
    ``datetime`` in a result) goes through kombu's decoder."""
    body = message.body
    if message.content_type == "application/json" and not message.headers.get("compression"):
        if isinstance(body, bytes) and b'"__type__"' not in body:
            return json.loads(body)
        if isinstance(body, str) and '"__type__"' not in body:
            return json.loads(body)
    return message.decode()


@dataclass
class ListenerStats:
    """What a listener did so far."""

    received: int = 0
    batches: int = 0
    applied: BatchSummary = field(default_factory=BatchSummary)
    store_failures: int = 0
    broker_failures: int = 0
    seconds_applying: float = 0.0

    @property
    def events_per_second(self) -> float:
        """Events applied per second of store work (not counting waits)."""
        return self.applied.total / self.seconds_applying if self.seconds_applying else 0.0


class ListenerReceiver(EventReceiver):
    """Celery's event receiver reading a named queue on the given connection.

    Differences from the base class: the queue is built from
    :class:`ListenerOptions` (durable without TTL/expiry on AMQP); messages are
    acknowledged by the listener after the batch is written (AMQP only);
    bodies are decoded once (:func:`decode_body`) and handed on as sent
    (timestamps not localised, no Lamport clock kept: the listener reads
    neither); events go to ``on_events(events, message)`` as whole messages;
    on AMQP the queue is bound with ``options.routing_keys`` only (a stale
    ``#`` binding is removed once the queue is declared).
    """

    def __init__(
        self,
        connection: Connection,
        *,
        app: Celery,
        options: ListenerOptions,
        on_events: Any,
    ) -> None:
        if options.queue_name is None:
            raise ValueError(
                "the receiver needs a queue name (a Listener gives the installation's)"
            )
        amqp = connection.transport.driver_type == "amqp"
        durable = amqp if options.durable is None else options.durable
        keys = options.routing_keys
        if not amqp and len(keys) > 1:
            keys = ALL_EVENTS  # a fanout subscription takes one pattern
        super().__init__(
            connection,
            app=app,
            node_id=options.queue_name,
            routing_key=keys[0],
            queue_durable=durable,
            queue_exclusive=not durable,
        )
        self.manual_ack = durable and amqp
        # room for the largest batch and the next one (acknowledged after
        # its write: a smaller window could never fill a batch)
        self.prefetch = options.largest_batch * 2
        self.on_events = on_events
        #: the ``#`` binding an older version left, removed once declared
        self.stale_keys = () if not amqp or "#" in keys else ALL_EVENTS
        self.queue = Queue(
            options.queue_name,
            bindings=[binding(self.exchange, routing_key=key) for key in keys],
            durable=durable,
            auto_delete=not durable,
            exclusive=not durable,
            message_ttl=None,
            expires=options.queue_expires if durable else app.conf.event_queue_expires,
        )

    def get_consumers(self, consumer_class: Any, channel: Any) -> list[Any]:
        return [
            consumer_class(
                queues=[self.queue],
                on_message=self._on_raw_message,
                no_ack=not self.manual_ack,
                accept=self.accept,
                prefetch_count=self.prefetch if self.manual_ack else None,
            )
        ]

    @contextmanager
    def Consumer(self) -> Iterator[tuple[Any, Any, Any]]:
        """Consume on the receiver's own connection (no clone, no reconnect:
        the listener's loop opens a new session after a failure)."""
        channel = self.channel
        consumer_class = partial(Consumer, channel, on_decode_error=self.on_decode_error)
        with self._consume_from(*self.get_consumers(consumer_class, channel)) as consumers:
            queue = self.queue.bind(channel)
            for key in self.stale_keys:  # (no error when there is no such binding)
                queue.unbind_from(self.exchange, routing_key=key)
            yield self.connection, channel, consumers

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        poison.drop(getattr(message, "body", message), exc, reason="undecodable")
        if self.manual_ack:
            message.ack()

    def _on_raw_message(self, message: Any) -> None:
        try:
            body = decode_body(message)
        except Exception as error:
            self.on_decode_error(message, error)
            return
        self._on_message(body, message)

    def _on_message(self, body: Any, message: Any) -> None:
        raw = body if isinstance(body, list) else [body]
        events = []
        for event in raw:
            if not isinstance(event, dict) or "type" not in event:
                poison.drop(event, TypeError("not a Celery event"), reason="not_an_event")
                continue
            events.append(event)
        self.on_events(events, message if self.manual_ack else None)


class Listener:
    """Reads Celery events from ``app``'s broker and applies them to ``store``.

    Use :meth:`run` (until ``stop`` is set), or :func:`listen` / :func:`drain`.
    """

    def __init__(
        self,
        app: Celery,
        store: SchedulerStore,
        *,
        rng: RandomSource,
        options: ListenerOptions | None = None,
        stop: threading.Event | None = None,
        handler: EventHandler | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.app = app
        self.store = store
        self.options = options or ListenerOptions()
        self.stop = stop or threading.Event()
        self.handler = handler or EventHandler(store, rng=rng)
        #: a handler made here has its lanes' threads stopped when :meth:`run` ends
        self._owns_handler = handler is None
        self.stats = ListenerStats()
        #: set while a session is consuming (its queue exists and is bound)
        self.ready = threading.Event()
        self._clock = clock
        self._lanes = self.options.lanes or (4 if store.capabilities.concurrent_writers else 1)
        self._pending: list[Mapping[str, Any]] = []
        #: events a batch holds before it is written (:func:`next_batch_size`)
        self.batch_target = self.options.batch_size
        self._messages: list[Any] = []
        self._first_at = 0.0
        self._last_event_at = 0.0
        self._retry_at = 0.0
        self._outage = Outage(logger, "writing events to the store")
        self._session_outage = Outage(logger, "listener session")
        self._summary = metrics.Summary(self.options.summary_every, clock)

    # -- single steps ---------------------------------------------------------

    def receive(self, events: list[Mapping[str, Any]], message: Any = None) -> None:
        """Buffer the events of one broker message (acknowledged after their batch)."""
        now = self._clock()
        if not self._pending:
            self._first_at = now
        self._last_event_at = now
        self._pending.extend(events)
        self.stats.received += len(events)
        if message is not None:
            self._messages.append(message)

    def due(self) -> bool:
        """Whether the buffered batch should be written now."""
        if not self._pending and not self._messages:
            return False
        now = self._clock()
        if now < self._retry_at:
            return False
        full = len(self._pending) >= self.batch_target
        return full or now - self._first_at >= self.options.batch_wait

    def flush(self, *, ack: bool = True) -> bool:
        """Write the buffered events, then acknowledge their messages.

        Returns False when the store failed: the batch is kept (and not
        acknowledged) for a retry after ``retry_delay``.
        """
        if not self._pending and not self._messages:
            return True
        started = time.perf_counter()
        try:
            try:
                # a batch that did not fill up was taken with the queue empty
                fresh = len(self._pending) < self.batch_target
                summary = self.handler.handle_batch(self._pending, lanes=self._lanes, fresh=fresh)
            except SchedulerError:
                raise
            except Exception as error:  # an event the store cannot take: find it
                logger.warning(
                    "a batch of %d events failed (%r); one by one", len(self._pending), error
                )
                summary = self._one_by_one()
        except SchedulerError as error:
            self.stats.store_failures += 1
            self._retry_at = self._clock() + self.options.retry_delay
            self._outage.failed(error)  # the events are kept for a retry
            return False
        self._outage.ok()
        self.stats.seconds_applying += time.perf_counter() - started
        self.stats.batches += 1
        self.batch_target = next_batch_size(
            self.batch_target,
            full=len(self._pending) >= self.batch_target,
            smallest=self.options.batch_size,
            largest=self.options.largest_batch,
        )
        self.stats.applied.merge(summary)
        metrics.applied(summary)
        if ack and self._messages:
            try:
                self._messages[-1].ack(multiple=True)
            except Exception as error:  # the channel closed: they will be redelivered
                logger.warning("could not acknowledge applied events: %s", error)
        logger.debug("applied %d events: %s", len(self._pending), dict(summary.counts))
        self._pending, self._messages = [], []
        return True

    def _one_by_one(self) -> BatchSummary:
        """Apply the buffered events one at a time, dropping those that
        raise anything but a store error (which is raised: retry later)."""
        summary = BatchSummary()
        for event in self._pending:
            try:
                summary.merge(self.handler.handle_batch([event]))
            except SchedulerError:
                raise
            except Exception as error:
                poison.drop(event, error)
        return summary

    def step(self, connection: Connection) -> None:
        """Write the batch if due, then wait up to ``poll_interval`` for events."""
        if self.due():
            self.flush()
        try:
            connection.drain_events(timeout=self.options.poll_interval)
        except TimeoutError:  # socket.timeout: nothing came
            connection.heartbeat_check()

    # -- the loop -------------------------------------------------------------

    def run(self, *, once: bool = False) -> ListenerStats:
        """Consume until ``stop`` is set (or, with ``once``, until no event came
        for ``idle_timeout`` seconds and everything received was written).

        With ``once`` a store or broker failure is raised; otherwise it is
        logged and retried.
        """
        failures: tuple[type[BaseException], ...] = (
            SchedulerError,
            OperationalError,
            OSError,
            *_broker_errors(self.app),
        )
        try:
            while not self.stop.is_set():
                try:
                    self._session(once=once)
                    if once:
                        break
                except failures as error:
                    if once:
                        raise
                    self.stats.broker_failures += 1
                    self._session_outage.failed(error)
                    # what was received is applied; its messages cannot be
                    # acknowledged any more and will be delivered again (AMQP)
                    self.flush(ack=False)
                    self._pending, self._messages = [], []
                    self.stop.wait(self.options.retry_delay)
        finally:
            if self._owns_handler:  # started again by the next batch, if any
                self.handler.close()
        return self.stats

    def _named(self, connection: Connection) -> None:
        """Name the queue after the installation when no name was given (a
        store error is retried as any), and say once if the queue of earlier
        versions is left on the vhost (:mod:`.names`)."""
        if self.options.queue_name is not None:
            return
        name = event_queue_name(self.store.installation_id())
        self.options = replace(self.options, queue_name=name)
        try:
            left = legacy_queue_left(connection)
        except Exception as error:  # only a hint: the listener works without it
            logger.debug("could not look for the old event queue: %s", error)
            return
        if left is not None:
            logger.warning("%s", legacy_queue_warning(left, name))

    def _session(self, *, once: bool) -> None:
        with self.app.connection_for_read() as connection:
            connect(connection)
            self._named(connection)
            receiver = ListenerReceiver(
                connection, app=self.app, options=self.options, on_events=self.receive
            )
            logger.info(
                "listening on %s queue %s (durable=%s, acknowledged after write=%s)",
                connection.as_uri(),
                receiver.queue.name,
                receiver.queue.durable,
                receiver.manual_ack,
            )
            self._last_event_at = self._clock()
            with receiver.consumer_context(wakeup=self.options.wakeup_workers) as (conn, _, _):
                self._session_outage.ok()
                self.ready.set()
                try:
                    self._consume(conn, once=once)
                finally:
                    self.ready.clear()

    def _consume(self, connection: Connection, *, once: bool) -> None:
        while not self.stop.is_set():
            self.step(connection)
            self._summary.tick(self.stats.received, self.stats.applied)
            idle = self._clock() - self._last_event_at
            if once and idle >= self.options.idle_timeout:
                if self.flush():
                    return
                raise SchedulerError("the store refused the events; see the log")
        if not self.flush():
            logger.error(
                "stopping with %d events not written; they are not acknowledged",
                len(self._pending),
            )


def _broker_errors(app: Celery) -> tuple[type[BaseException], ...]:
    connection = app.connection_for_read()
    try:
        return tuple(connection.connection_errors) + tuple(connection.channel_errors)
    finally:
        connection.release()


def listen(
    app: Celery,
    store: SchedulerStore,
    *,
    rng: RandomSource,
    stop: threading.Event,
    options: ListenerOptions | None = None,
) -> ListenerStats:
    """Apply events until ``stop`` is set (the ``start-listener`` daemon)."""
    return Listener(app, store, rng=rng, options=options, stop=stop).run()


def drain(
    app: Celery,
    store: SchedulerStore,
    *,
    rng: RandomSource,
    options: ListenerOptions | None = None,
) -> ListenerStats:
    """Apply the events already queued (and those arriving meanwhile) and
    return once none came for ``options.idle_timeout`` seconds."""
    return Listener(app, store, rng=rng, options=options).run(once=True)
