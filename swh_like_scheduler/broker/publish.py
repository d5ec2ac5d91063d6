"""Publish a batch of Celery task messages, fast.

``publish_batch`` sends ordinary Celery protocol-2 messages: a stock
``celery worker`` consuming the queue executes them, with the task id the
runner chose.  Each queue is declared once per batch (not once per message
as ``send_task`` does).  Three ways of sending, chosen per batch:

- kombu's Redis transport: envelopes built once with the channel's helpers
  and pushed in one pipeline (see :mod:`.redis_fast`); measured at 3-4 times
  the rate of ``Producer.publish`` inside ``Producer.batch()``, which alone
  stays well below the runner's target;
- py-amqp (RabbitMQ): the frames of each ``basic.publish`` written directly
  (see :mod:`.amqp_fast`), :data:`MESSAGES_PER_CHECK` messages per socket
  write, each chunk confirmed by a round trip as below;
- any other transport, or when a signal receiver or compression asks for
  kombu's own path: ``kombu.Producer.publish`` per message
  (inside ``Producer.batch()`` where the transport supports it).  On AMQP
  the frames of :data:`MESSAGES_PER_CHECK` messages leave in one socket
  write (see :mod:`.amqp_writes`), then a passive declare of the last queue
  makes a round trip, so the broker is known to have processed what came
  before it on the channel.

No retry happens once sending has started: a lost connection cannot make a
message go out twice.  Every failure becomes :class:`.PublishError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from celery import Celery, signals
from kombu import Connection, Producer

from swh_like_scheduler.broker import amqp_fast, redis_fast
from swh_like_scheduler.broker.amqp_writes import coalesced_writes, lean_publishes
from swh_like_scheduler.broker.connection import connection_scope, describe, error_text
from swh_like_scheduler.broker.errors import PublishError
from swh_like_scheduler.broker.message import Message
from swh_like_scheduler.broker.routing import Route, resolve_route
from swh_like_scheduler.broker.taskmsg import TaskMessageBuilder

#: Messages between two round trips that confirm progress (kombu path).
MESSAGES_PER_CHECK = 5000


def publish_batch(
    app: Celery, messages: Sequence[Message], *, connection: Connection | None = None
) -> int:
    """Publish ``messages`` as Celery tasks, in order; return how many were sent.

    ``messages`` may go to several queues; each message is published as
    ``app.send_task(m.task_name, m.args, m.kwargs, task_id=m.task_id,
    queue=m.queue, priority=m.priority)`` would publish it (same headers,
    properties and body; the result backend is not told about the task).
    Messages of one queue reach it in the order given.

    ``connection`` is a kombu connection to ``app``'s broker to reuse (kept
    open); without it one is opened and closed.  Connecting is retried
    briefly and is bounded in time; sending is not retried.

    Raises :class:`PublishError` if the broker cannot be reached, refuses a
    declaration or a message, or the connection is lost; its ``published``
    attribute says how many messages from the start of the batch the broker
    is known to have received.
    """
    if not messages:
        return 0
    total = len(messages)
    progress = [0]
    where = describe(app, connection)
    try:
        routes = _routes(app, messages)
        builder = TaskMessageBuilder(app)
        with connection_scope(app, connection) as conn:
            channel = conn.default_channel
            for route in routes.values():
                route.queue.declare(channel=channel)
            conf = app.conf
            if redis_fast.usable(channel, routes.values(), conf.task_compression):
                redis_fast.publish(
                    channel, builder, messages, routes, conf.task_serializer, progress
                )
            elif amqp_fast.usable(conn, channel, conf.task_serializer, conf.task_compression):
                amqp_fast.publish(
                    conn, channel, builder, messages, routes, progress, MESSAGES_PER_CHECK
                )
            else:
                _publish_with_producer(app, conn, channel, builder, messages, routes, progress)
    except PublishError:
        raise
    except Exception as exc:
        raise PublishError(
            f"{where}: {error_text(exc)}", published=progress[0], total=total
        ) from exc
    return total


def _routes(app: Celery, messages: Sequence[Message]) -> dict[str, Route]:
    routes: dict[str, Route] = {}
    for message in messages:
        if message.queue not in routes:
            try:
                routes[message.queue] = resolve_route(app, message.queue)
            except KeyError as exc:
                raise PublishError(
                    f"queue {message.queue!r} is not in task_queues and "
                    "task_create_missing_queues is off",
                    published=0,
                    total=len(messages),
                ) from exc
    return routes


def _publish_with_producer(
    app: Celery,
    connection: Connection,
    channel: Any,
    builder: TaskMessageBuilder,
    messages: Sequence[Message],
    routes: dict[str, Route],
    progress: list[int],
) -> None:
    conf = app.conf
    serializer = conf.task_serializer
    compression = conf.task_compression
    producer = Producer(channel, auto_declare=False)
    batching = producer.supports_batch_publish
    check = connection.transport.driver_type == "amqp"
    before = signals.before_task_publish.send if signals.before_task_publish.receivers else None
    after = signals.after_task_publish.send if signals.after_task_publish.receivers else None
    for start in range(0, len(messages), MESSAGES_PER_CHECK):
        chunk = messages[start : start + MESSAGES_PER_CHECK]
        scope = producer.batch(max_size=MESSAGES_PER_CHECK * 2) if batching else nullcontext()
        with coalesced_writes(connection), lean_publishes(channel), scope:
            _send_chunk(producer, builder, chunk, routes, serializer, compression, before, after)
        if check:
            # AMQP methods of a channel are processed in order: once this
            # answers, the broker has routed every message sent before it.
            channel.queue_declare(queue=routes[chunk[-1].queue].queue.name, passive=True)
        progress[0] += len(chunk)


def _send_chunk(
    producer: Producer,
    builder: TaskMessageBuilder,
    chunk: Sequence[Message],
    routes: dict[str, Route],
    serializer: str,
    compression: str | None,
    before: Any,
    after: Any,
) -> None:
    publish = producer.publish
    build = builder.build
    for message in chunk:
        route = routes[message.queue]
        headers, properties, body = build(message)
        if message.priority is not None:
            properties["priority"] = message.priority
        if before is not None:
            before(
                sender=message.task_name,
                body=body,
                exchange=route.exchange,
                routing_key=route.routing_key,
                declare=[route.queue],
                headers=headers,
                properties=properties,
                retry_policy={},
            )
        publish(
            body,
            exchange=route.exchange,
            routing_key=route.routing_key,
            serializer=serializer,
            compression=compression,
            delivery_mode=route.delivery_mode,
            headers=headers,
            **properties,
        )
        if after is not None:
            after(
                sender=message.task_name,
                body=body,
                headers=headers,
                exchange=route.exchange,
                routing_key=route.routing_key,
            )
