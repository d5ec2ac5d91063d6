"""Publishing to RabbitMQ over py-amqp by writing each ``basic.publish``'s frames.

A ``basic.publish`` is three frames: the method (exchange and routing key,
the same for every message of a queue), the content header (body size and
properties) and the body. Through ``kombu.Producer.publish`` a message
costs about 40 µs of Python, a third of it py-amqp encoding the properties
(the ``headers`` table of twenty-odd entries). Here the properties of one
kind of message (task name, queue, priority) are encoded once by py-amqp
itself, with markers where the task id, ``argsrepr`` and ``kwargsrepr`` go
(:class:`PropertiesTemplate`); a message then costs a few byte joins. The
frames of a few hundred messages leave in one socket write.

The bytes are those py-amqp writes for kombu's publish of the same message
(``tests/integration/broker/test_amqp_fast.py`` checks it frame by frame).
Used only when nothing would make them differ (see :func:`usable`): a
py-amqp connection with its channel not in confirm mode, kombu's JSON
serializer, no compression, no publish signal receivers. A message too large
for one body frame goes through py-amqp's own frame writer.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from amqp import spec
from amqp.serialization import dumps as amqp_dumps
from celery import signals
from kombu import Connection, serialization

from swh_like_scheduler.broker.amqp_writes import FrameBuffer, plain_publish, poll_blocked
from swh_like_scheduler.broker.fastjson import PROBE
from swh_like_scheduler.broker.fastjson import encode_json as _encode_json
from swh_like_scheduler.broker.message import Message
from swh_like_scheduler.broker.routing import Route
from swh_like_scheduler.broker.taskmsg import EMBED, HOLES, TaskMessageBuilder

#: What kombu's ``json`` serializer says its output is.
CONTENT_TYPE, ENCODING = "application/json", "utf-8"
#: AMQP's frame end octet.
FRAME_END = b"\xce"
#: Room kept in a frame for py-amqp's overhead (its ``FRAME_OVERHEAD``).
_OVERHEAD = 40
_HEADER = struct.Struct(">BHIHHQ")  # type 2 frame: channel, size, class, weight, body size
_BODY = struct.Struct(">BHI")  # type 3 frame: channel, size
_LONG = struct.Struct(">I")
_SHORT = struct.Struct("B")
_TABLE_HOLES = ("id", "argsrepr", "kwargsrepr")


def usable(connection: Connection, channel: Any, serializer: str, compression: str | None) -> bool:
    """Whether messages may be written as frames on ``channel``."""
    if connection.transport.driver_type != "amqp" or compression or serializer != "json":
        return False
    if serialization.dumps(PROBE, serializer="json") != (
        CONTENT_TYPE,
        ENCODING,
        _encode_json(PROBE),
    ):
        return False  # another encoder is registered as "json"
    if signals.before_task_publish.receivers or signals.after_task_publish.receivers:
        return False
    raw = connection.connection
    if not all(hasattr(raw, name) for name in ("frame_writer_cls", "transport", "frame_max")):
        return False
    return plain_publish(channel)


def _publish_args(route: Route) -> bytes:
    """The arguments of ``basic.publish`` to ``route``, as py-amqp encodes them."""
    return amqp_dumps("Bssbb", (0, route.exchange, route.routing_key, False, False))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class PropertiesTemplate:
    """The encoded properties of one kind of message, with holes.

    Built from py-amqp's encoding of properties whose ``id``/``root_id``
    headers and ``correlation_id`` hold :data:`HOLES["id"] <HOLES>`, and
    ``argsrepr``/``kwargsrepr`` their markers; refuses (``ValueError``) any
    layout it does not recognise."""

    def __init__(self, encoded: bytes, headers_table: bytes) -> None:
        table_at = encoded.find(headers_table)
        if table_at < 0 or encoded.find(headers_table, table_at + 1) >= 0:
            raise ValueError("the headers table is not found once in the properties")
        self._table_length = len(headers_table) - 4
        markers = {_utf8(HOLES[name]): name for name in (*_TABLE_HOLES, "id")}
        pattern = b"|".join(re.escape(marker) for marker in markers)
        pieces = re.split(b"(" + pattern + b")", encoded[table_at + 4 :])
        self._head = encoded[:table_at]
        #: (fixed bytes before the hole, hole name, inside the table?)
        self._holes: list[tuple[bytes, str, bool]] = []
        position = table_at + 4
        table_end = table_at + len(headers_table)
        for fixed, marker in zip(pieces[0::2], pieces[1::2], strict=False):
            position += len(fixed)
            in_table = position < table_end
            size = _LONG if in_table else _SHORT
            if not fixed.endswith(size.pack(len(marker))):
                raise ValueError("a marker is not a string where it was expected")
            self._holes.append((fixed[: -size.size], markers[marker], in_table))
            position += len(marker)
        self._tail = pieces[-1]
        names = [name for _fixed, name, in_table in self._holes if in_table]
        if sorted(names) != sorted(["id", "id", "argsrepr", "kwargsrepr"]):
            raise ValueError(f"unexpected headers holes: {names}")
        if [name for _fixed, name, in_table in self._holes if not in_table] != ["id"]:
            raise ValueError("the correlation id is not the only property hole")
        self._marker_sizes = {name: len(_utf8(HOLES[name])) for name in (*_TABLE_HOLES,)}

    def fill(self, values: dict[str, bytes]) -> bytes:
        """The encoded properties with ``values`` (UTF-8) in the holes."""
        grow = 0
        parts = [self._head, b""]
        for fixed, name, in_table in self._holes:
            value = values[name]
            if in_table:
                grow += len(value) - self._marker_sizes[name]
                parts.append(fixed)
                parts.append(_LONG.pack(len(value)))
            else:
                if len(value) > 255:
                    raise ValueError(f"{name} is longer than an AMQP short string")
                parts.append(fixed)
                parts.append(_SHORT.pack(len(value)))
            parts.append(value)
        parts.append(self._tail)
        parts[1] = _LONG.pack(self._table_length + grow)
        return b"".join(parts)


class Frames:
    """Encodes messages for one py-amqp channel as the frames py-amqp writes."""

    def __init__(
        self,
        connection: Connection,
        channel: Any,
        builder: TaskMessageBuilder,
        routes: dict[str, Route],
    ) -> None:
        self.raw = connection.connection
        self.channel = channel
        self.builder = builder
        self.routes = routes
        self.channel_id: int = channel.channel_id
        self._methods: dict[str, bytes] = {}
        self._templates: dict[
            tuple[str, str, int | None, tuple[float | None, float | None]],
            PropertiesTemplate | None,
        ] = {}

    def _properties(self, message: Message, route: Route, body: bytes) -> Any:
        """The py-amqp message kombu's ``Producer.publish`` would make."""
        headers, properties, _body = self.builder.build(message)
        return self.channel.prepare_message(
            body,
            message.priority or 0,
            CONTENT_TYPE,
            ENCODING,
            headers,
            {**properties, "delivery_mode": route.delivery_mode},
        )

    def method_frame(self, route: Route) -> bytes:
        """The ``basic.publish`` method frame to ``route``."""
        frame = self._methods.get(route.name)
        if frame is None:
            payload = struct.pack(">HH", *spec.Basic.Publish) + _publish_args(route)
            frame = _BODY.pack(1, self.channel_id, len(payload)) + payload + FRAME_END
            self._methods[route.name] = frame
        return frame

    def template(self, message: Message) -> PropertiesTemplate | None:
        which = (message.task_name, message.queue, message.priority, message.time_limits)
        if which not in self._templates:
            holes = Message(
                HOLES["id"],
                message.task_name,
                message.queue,
                (),
                {},
                message.priority,
                message.time_limits,
            )
            amqp_message = self._properties(holes, self.routes[message.queue], b"")
            headers = amqp_message.properties["application_headers"]
            headers["argsrepr"] = HOLES["argsrepr"]
            headers["kwargsrepr"] = HOLES["kwargsrepr"]
            try:
                template: PropertiesTemplate | None = PropertiesTemplate(
                    amqp_message._serialize_properties(), amqp_dumps("F", [headers])
                )
            except ValueError:
                template = None
            self._templates[which] = template
        return self._templates[which]

    def encode(self, message: Message) -> bytes:
        """The frames of ``message``'s ``basic.publish``."""
        route = self.routes[message.queue]
        args, kwargs = message.args, message.kwargs
        if type(kwargs) is not dict:
            kwargs = dict(kwargs)
        body = _utf8(_encode_json((args, kwargs, EMBED)))
        template = self.template(message)
        method = self.method_frame(route)
        properties = None
        if template is not None:
            argsrepr, kwargsrepr = self.builder.reprs(args, kwargs)
            values = {"id": _utf8(message.task_id), "argsrepr": _utf8(argsrepr)}
            values["kwargsrepr"] = _utf8(kwargsrepr)
            with suppress(ValueError):  # an id too long: py-amqp says why
                properties = template.fill(values)
        size = len(method) + len(body) + (len(properties) if properties else 0) + _OVERHEAD
        if properties is None or size > self.raw.frame_max - 8:
            return self._through_py_amqp(message, route, body)
        channel_id = self.channel_id
        parts = [method, _HEADER.pack(2, channel_id, 12 + len(properties), 60, 0, len(body))]
        parts.append(properties)
        parts.append(FRAME_END)
        if body:
            parts.append(_BODY.pack(3, channel_id, len(body)))
            parts.append(body)
            parts.append(FRAME_END)
        return b"".join(parts)

    def _through_py_amqp(self, message: Message, route: Route, body: bytes) -> bytes:
        buffer = FrameBuffer()
        writer = self.raw.frame_writer_cls(self.raw, buffer)
        properties = self._properties(message, route, body)
        writer(1, self.channel_id, spec.Basic.Publish, _publish_args(route), properties)
        return b"".join(buffer.chunks)


#: Messages whose frames leave in one socket write: the broker routes (and
#: stores) them while the next ones are encoded.
MESSAGES_PER_WRITE = 500


def publish(
    connection: Connection,
    channel: Any,
    builder: TaskMessageBuilder,
    messages: Sequence[Message],
    routes: dict[str, Route],
    progress: list[int],
    per_check: int,
) -> None:
    """Write ``messages`` (their queues already declared) on ``channel``,
    ``per_check`` at a time, then a passive declare whose answer shows the
    broker has processed them (AMQP methods of a channel are handled in
    order); ``progress[0]`` grows by each confirmed chunk. The frames of a
    chunk leave :data:`MESSAGES_PER_WRITE` messages per socket write, so
    the broker takes the first ones while the others are being encoded."""
    frames = Frames(connection, channel, builder, routes)
    raw = connection.connection
    write = raw.transport.write
    encode = frames.encode
    for start in range(0, len(messages), per_check):
        chunk = messages[start : start + per_check]
        poll_blocked(raw)
        for low in range(0, len(chunk), MESSAGES_PER_WRITE):
            write(b"".join(map(encode, chunk[low : low + MESSAGES_PER_WRITE])))
        raw.bytes_sent += 1  # py-amqp's heartbeat looks for outgoing traffic
        channel.queue_declare(queue=routes[chunk[-1].queue].queue.name, passive=True)
        progress[0] += len(chunk)
