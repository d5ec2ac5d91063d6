"""Frames written by ``amqp_fast`` are byte for byte those py-amqp writes for
kombu's ``Producer.publish`` of the same message (``test_publish`` compares
what that path sends with ``send_task``'s message)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import services
from brokertest import call_args, call_kwargs, make_app, task_ids, time_limits
from celery import Celery
from hypothesis import given, settings
from hypothesis import strategies as st
from kombu import Connection, Producer
from waiting import wait_until

from swh_like_scheduler.broker import Message, publish_batch, queue_depth
from swh_like_scheduler.broker.amqp_fast import Frames, PropertiesTemplate, usable
from swh_like_scheduler.broker.amqp_writes import FrameBuffer, lean_publishes
from swh_like_scheduler.broker.publish import _send_chunk
from swh_like_scheduler.broker.routing import resolve_route
from swh_like_scheduler.broker.taskmsg import TaskMessageBuilder

pytestmark = pytest.mark.rabbitmq

TASK = "swh_like_scheduler.tests.broker.record"
QUEUE = "swh-amqp-frames-test"


@pytest.fixture(scope="module")
def amqp() -> Iterator[tuple[Celery, Any, Any]]:
    app = make_app(services.require("rabbitmq", services.amqp_url))
    with app.connection_for_write() as connection:
        connection.ensure_connection()
        yield app, connection, connection.default_channel


def _kombu_frames(app: Celery, connection: Any, channel: Any, message: Message) -> bytes:
    """What py-amqp writes on the socket for kombu's publish of ``message``."""
    raw = connection.connection
    buffer = FrameBuffer()
    original = raw.frame_writer
    raw.frame_writer = raw.frame_writer_cls(raw, buffer)
    try:
        with lean_publishes(channel):
            routes = {message.queue: resolve_route(app, message.queue)}
            producer = Producer(channel, auto_declare=False)
            _send_chunk(
                producer, TaskMessageBuilder(app), [message], routes, "json", None, None, None
            )
    finally:
        raw.frame_writer = original
    return b"".join(buffer.chunks)


def _our_frames(app: Celery, connection: Any, channel: Any, message: Message) -> bytes:
    routes = {message.queue: resolve_route(app, message.queue)}
    return Frames(connection, channel, TaskMessageBuilder(app), routes).encode(message)


@settings(max_examples=300, deadline=None)
@given(
    args=call_args,
    kwargs=call_kwargs,
    priority=st.none() | st.integers(0, 255),
    task_id=task_ids,
    limits=time_limits,
)
def test_frames_equal_py_amqp_frames(
    amqp: tuple[Celery, Any, Any],
    args: list[Any],
    kwargs: dict[str, Any],
    priority: int | None,
    task_id: str,
    limits: tuple[float | None, float | None],
) -> None:
    app, connection, channel = amqp
    message = Message(task_id, TASK, QUEUE, tuple(args), kwargs, priority, limits)
    assert _our_frames(app, connection, channel, message) == _kombu_frames(
        app, connection, channel, message
    )


def test_templates_are_used_and_big_or_odd_messages_still_match(
    amqp: tuple[Celery, Any, Any],
) -> None:
    app, connection, channel = amqp
    routes = {QUEUE: resolve_route(app, QUEUE)}
    frames = Frames(connection, channel, TaskMessageBuilder(app), routes)
    assert isinstance(frames.template(Message("x", TASK, QUEUE)), PropertiesTemplate)
    for message in (
        # a body larger than one frame: split as py-amqp splits it
        Message(str(uuid.uuid4()), TASK, QUEUE, ("x" * 300_000,)),
        # a task id too long for the correlation_id short string: py-amqp refuses it
        Message("i" * 200, TASK, QUEUE, (1,)),
    ):
        assert _our_frames(app, connection, channel, message) == _kombu_frames(
            app, connection, channel, message
        )


def test_a_confirming_channel_is_left_to_kombu(amqp: tuple[Celery, Any, Any]) -> None:
    _app, connection, channel = amqp
    assert usable(connection, channel, "json", None)
    assert not usable(connection, channel, "pickle", None)
    assert not usable(connection, channel, "json", "zlib")
    # publisher confirms: each publish waits for the broker's ack
    url = services.require("rabbitmq", services.amqp_url)
    with Connection(url, transport_options={"confirm_publish": True}) as confirming:
        assert not usable(confirming, confirming.default_channel, "json", None)


def assert_queued_in_order(app: Celery, queue: str, messages: list[Message]) -> None:
    """``queue`` holds ``messages`` in their order (taken off it)."""
    with app.connection_for_write() as reader:
        for message in messages:
            got = reader.default_channel.basic_get(queue, no_ack=True)
            assert got is not None and got.headers["id"] == message.task_id


def test_published_frames_reach_the_queue(amqp: tuple[Celery, Any, Any]) -> None:
    app, _connection, _channel = amqp
    queue = f"swh-amqp-fast-{uuid.uuid4().hex[:8]}"
    messages = [Message(str(uuid.uuid4()), TASK, queue, (i,), {"n": i}) for i in range(2500)]
    try:
        assert publish_batch(app, messages) == 2500
        # the count of a classic queue may trail the publishes for a moment
        wait_until(lambda: queue_depth(app, queue) == 2500, 10, "2,500 messages in the queue")
        assert_queued_in_order(app, queue, messages)
    finally:
        with app.connection_for_write() as connection:
            connection.default_channel.queue_delete(queue)


def test_a_chunk_leaves_in_several_writes_and_one_confirm(
    amqp: tuple[Celery, Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frames of a chunk go out a few messages per socket write (the
    broker takes the first while the next are encoded), in order, with one
    round trip for the whole chunk."""
    import struct

    from amqp import spec

    from swh_like_scheduler.broker import amqp_fast

    app, connection, _channel = amqp
    monkeypatch.setattr(amqp_fast, "MESSAGES_PER_WRITE", 3)
    queue = f"swh-amqp-fast-{uuid.uuid4().hex[:8]}"
    messages = [Message(str(uuid.uuid4()), TASK, queue, (i,), {"n": i}) for i in range(10)]
    transport = connection.connection.transport
    publish_method = struct.pack(">HH", *spec.Basic.Publish)
    writes: list[int] = []
    declares: list[str] = []
    original_write = transport.write
    original_declare = connection.default_channel.queue_declare

    def write(data: bytes) -> None:
        writes.append(bytes(data).count(publish_method))
        original_write(data)

    def declare(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("passive"):
            declares.append(kwargs.get("queue", ""))
        return original_declare(*args, **kwargs)

    monkeypatch.setattr(transport, "write", write)
    monkeypatch.setattr(connection.default_channel, "queue_declare", declare)
    try:
        assert publish_batch(app, messages, connection=connection) == 10
        assert [n for n in writes if n] == [3, 3, 3, 1]
        assert declares == [queue]  # the passive declare after the chunk
        wait_until(lambda: queue_depth(app, queue) == 10, 10, "10 messages in the queue")
        assert_queued_in_order(app, queue, messages)
    finally:
        monkeypatch.undo()
        with app.connection_for_write() as cleaner:
            cleaner.default_channel.queue_delete(queue)


def test_another_json_encoder_is_left_to_kombu(amqp: tuple[Celery, Any, Any]) -> None:
    import json

    from kombu import serialization
    from kombu.utils.json import loads

    _app, connection, channel = amqp
    serialization.register("json", lambda v: json.dumps(v, indent=1), loads, "application/json")
    try:
        assert not usable(connection, channel, "json", None)
    finally:
        serialization.register_json()  # kombu's own, as at import
    assert usable(connection, channel, "json", None)
