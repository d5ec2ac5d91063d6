"""Publishing to kombu's Redis transport in one pipeline.

kombu's Redis channel stores a message as the JSON text of an envelope
(``body``, ``content-encoding``, ``content-type``, ``headers``,
``properties``) pushed with ``LPUSH`` on the queue's list (or on the list of
its priority step, ``<queue>\\x06\\x16<step>``); a worker pops from the other
end, so the order of a batch is kept.  Going through ``Producer.publish``
costs about 40 µs per message in Python layers (double routing, one
``LPUSH`` per message); here every envelope is built with the channel's own
helpers (body codec, priority steps) and kombu's JSON encoder (delivery
tags: see :func:`delivery_tags`), and up to :data:`VALUES_PER_COMMAND` envelopes travel in one
``LPUSH``, so the bytes a worker reads are the ones kombu would have
written.

Only used when nothing would make the envelope differ: the queue is reached
through the default exchange, it has no ``x-expires``, no compression is
configured, no ``before/after_task_publish`` signal receiver is connected, and
the channel says pipelines are safe (no automatic retry that could push
twice).  :func:`usable` checks these.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from celery import signals
from kombu import serialization
from kombu.transport.redis import Channel as RedisChannel

from swh_like_scheduler.broker.fastjson import encode_json as _encode_json
from swh_like_scheduler.broker.message import Message
from swh_like_scheduler.broker.redis_template import EnvelopeTemplate
from swh_like_scheduler.broker.routing import Route
from swh_like_scheduler.broker.taskmsg import HOLES, TaskMessageBuilder

#: Envelopes sent with one ``LPUSH`` command.
VALUES_PER_COMMAND = 1000
#: Messages sent per pipeline round trip; also the unit ``published`` counts in.
MESSAGES_PER_ROUND_TRIP = 5000

_CHANNEL_HELPERS = (
    "encode_body",
    "body_encoding",
    "_q_for_pri",
    "_get_message_priority",
    "_expires",
    "conn_or_acquire",
    "supports_batch_publish",
)


def usable(channel: Any, routes: Iterable[Route], compression: str | None) -> bool:
    """Whether messages to ``routes`` may be written directly on ``channel``."""
    if not isinstance(channel, RedisChannel) or compression:
        return False
    if signals.before_task_publish.receivers or signals.after_task_publish.receivers:
        return False  # receivers expect one call per message: use kombu's path
    if not all(hasattr(channel, name) for name in _CHANNEL_HELPERS):
        return False
    if not channel.supports_batch_publish:
        return False
    expires = channel._expires or {}
    return all(route.exchange == "" and route.name not in expires for route in routes)


def delivery_tags() -> Iterator[str]:
    """Unique delivery tags shaped like kombu's (a UUID string).

    kombu draws a fresh ``uuid4`` per message, a system call each; here one
    random UUID per batch keeps its first 80 bits and a counter fills the
    last 48, so tags stay unique among the messages in flight (the only use
    the Redis transport makes of them, as keys of its unacked index)."""
    head = str(uuid.uuid4())[:24]
    return (f"{head}{n:012x}" for n in itertools.count())


class _Envelopes:
    """Builds envelopes and groups them per Redis key, keeping their order.

    Messages of a task name and key whose envelope has a template (see
    :mod:`.redis_template`) are filled in; others are built field by field
    as kombu builds them."""

    def __init__(
        self,
        channel: Any,
        builder: TaskMessageBuilder,
        routes: dict[str, Route],
        serializer: str,
    ) -> None:
        self.channel = channel
        self.builder = builder
        self.routes = routes
        self.serializer = serializer
        self._keys: dict[tuple[str, int | None], str] = {}
        self._templates: dict[
            tuple[str, str, int | None, tuple[float | None, float | None]], EnvelopeTemplate | None
        ] = {}
        self.tags = delivery_tags()

    def key(self, queue: str, priority: int | None) -> str:
        """The Redis list a message of ``queue`` with ``priority`` goes to."""
        cached = self._keys.get((queue, priority))
        if cached is None:
            channel = self.channel
            step = channel._get_message_priority(
                {"properties": {"priority": priority or 0}}, reverse=False
            )
            cached = self._keys[(queue, priority)] = channel._q_for_pri(queue, step)
        return cached

    def _encode_body(self, body: Any) -> tuple[str, str, str, str]:
        """``(payload, body encoding, content type, content encoding)``."""
        content_type, content_encoding, payload = serialization.dumps(
            body, serializer=self.serializer
        )
        payload, used_encoding = self.channel.encode_body(payload, self.channel.body_encoding)
        return payload, used_encoding, content_type, content_encoding

    def envelope(self, message: Message, body: str | None, tag: str) -> dict[str, Any]:
        """The envelope of ``message`` (with ``body`` in place of its encoded
        body when given: a template's marker)."""
        route = self.routes[message.queue]
        headers, properties, built_body = self.builder.build(message)
        payload, used_encoding, content_type, content_encoding = self._encode_body(built_body)
        # the properties kombu's Producer.publish and Redis channel add
        properties["delivery_mode"] = route.delivery_mode
        properties["delivery_info"] = {"exchange": "", "routing_key": route.routing_key}
        properties["priority"] = message.priority or 0
        properties["body_encoding"] = used_encoding
        properties["delivery_tag"] = tag
        return {
            "body": payload if body is None else body,
            "content-encoding": content_encoding,
            "content-type": content_type,
            "headers": headers,
            "properties": properties,
        }

    def template(self, message: Message) -> EnvelopeTemplate | None:
        """The template of the messages like ``message`` (``None``: none)."""
        which = (message.task_name, message.queue, message.priority, message.time_limits)
        if which in self._templates:
            return self._templates[which]
        template = None
        if self.serializer == "json":
            holes = Message(
                HOLES["id"],
                message.task_name,
                message.queue,
                (),
                {},
                message.priority,
                message.time_limits,
            )
            envelope = self.envelope(holes, HOLES["body"], HOLES["tag"])
            envelope["headers"]["argsrepr"] = HOLES["argsrepr"]
            envelope["headers"]["kwargsrepr"] = HOLES["kwargsrepr"]
            template = EnvelopeTemplate.create(
                envelope, _encode_json, lambda body: self._encode_body(body)[0]
            )
        self._templates[which] = template
        return template

    def grouped(self, chunk: Sequence[Message]) -> list[tuple[str, list[str]]]:
        """``[(key, [envelope JSON, ...]), ...]`` for ``chunk``, in its order."""
        next_tag = self.tags.__next__
        reprs = self.builder.reprs
        routes = self.routes
        groups: list[tuple[str, list[str]]] = []
        current_key = ""
        current: list[str] = []
        for message in chunk:
            template = self.template(message)
            if template is None:
                text = _encode_json(self.envelope(message, None, next_tag()))
            else:
                args, kwargs = message.args, message.kwargs
                if type(kwargs) is not dict:
                    kwargs = dict(kwargs)
                text = template.fill(message.task_id, args, kwargs, reprs(args, kwargs), next_tag())
            key = self.key(routes[message.queue].routing_key, message.priority)
            if key != current_key or len(current) >= VALUES_PER_COMMAND:
                current_key, current = key, []
                groups.append((key, current))
            current.append(text)
        return groups


def publish(
    channel: Any,
    builder: TaskMessageBuilder,
    messages: Sequence[Message],
    routes: dict[str, Route],
    serializer: str,
    progress: list[int],
) -> None:
    """Push ``messages`` (their queues already declared) through ``channel``.

    ``progress[0]`` is increased by the number of messages whose ``LPUSH``
    the server has executed, round trip after round trip, so that a caller
    can tell how far a failed batch went.
    """
    envelopes = _Envelopes(channel, builder, routes, serializer)
    with channel.conn_or_acquire() as client, client.pipeline(transaction=False) as pipe:
        for start in range(0, len(messages), MESSAGES_PER_ROUND_TRIP):
            chunk = messages[start : start + MESSAGES_PER_ROUND_TRIP]
            for key, values in envelopes.grouped(chunk):
                pipe.lpush(key, *values)
            pipe.execute()
            progress[0] += len(chunk)
