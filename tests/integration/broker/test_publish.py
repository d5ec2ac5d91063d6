"""publish_batch and queue depths against real brokers (Redis and RabbitMQ)."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from celery import Celery

from swh_like_scheduler.broker import Message, publish_batch, queue_depth, queue_depths
from swh_like_scheduler.domain.exceptions import SchedulerError

TASK = "swh_like_scheduler.tests.broker.record"


def _messages(queue: str, count: int, *, start: int = 0) -> list[Message]:
    return [
        Message(
            task_id=str(uuid.uuid4()),
            task_name=TASK,
            queue=queue,
            args=(f"https://example.org/repo/{i}", i),
            kwargs={"visit_type": "git", "n": i},
        )
        for i in range(start, start + count)
    ]


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _get_raw(app: Celery, queue: str, count: int) -> list[Any]:
    """Up to ``count`` messages taken from ``queue`` (acknowledged)."""
    taken = []
    with app.connection_for_read() as conn:
        channel = conn.channel()
        deadline = time.monotonic() + 10
        while len(taken) < count and time.monotonic() < deadline:
            message = channel.basic_get(queue, no_ack=True)
            if message is None:
                time.sleep(0.02)
                continue
            taken.append(message)
        channel.close()
    return taken


def test_depths_count_the_messages_of_each_queue(
    app: Celery, make_queue: Callable[[], str]
) -> None:
    first, second, missing = make_queue(), make_queue(), make_queue()
    messages = _messages(first, 1_200) + _messages(second, 800, start=1_200)
    messages.sort(key=lambda message: message.args[1] % 7)  # interleave the queues

    assert queue_depths(app, [first, second, missing]) == {first: 0, second: 0, missing: 0}
    assert publish_batch(app, messages) == 2_000

    expected = {first: 1_200, second: 800, missing: 0}
    # RabbitMQ may count a message a moment after it confirmed the channel
    assert _wait_for(lambda: queue_depths(app, [first, second, missing]) == expected)
    assert queue_depth(app, first) == 1_200
    assert queue_depth(app, missing) == 0


def test_a_given_connection_is_reused_and_left_open(
    app: Celery, make_queue: Callable[[], str]
) -> None:
    queue = make_queue()
    with app.connection_for_write() as conn:
        assert publish_batch(app, _messages(queue, 10), connection=conn) == 10
        assert publish_batch(app, _messages(queue, 5), connection=conn) == 5
        assert conn.connected
        assert _wait_for(lambda: queue_depth(app, queue, connection=conn) == 15)
        assert queue_depths(app, [queue, "swh-broker-test-absent"], connection=conn) == {
            queue: 15,
            "swh-broker-test-absent": 0,
        }
        assert conn.connected
    assert publish_batch(app, []) == 0


def test_messages_are_those_send_task_would_send(
    app: Celery, make_queue: Callable[[], str]
) -> None:
    ours, theirs = make_queue(), make_queue()
    messages = _messages(ours, 5)
    messages[1] = Message(
        str(uuid.uuid4()), TASK, ours, ("it's", None, 1.5, [True]), {"d": {"k": "v"}}
    )
    publish_batch(app, messages)
    for message in messages:
        app.send_task(
            message.task_name,
            message.args,
            dict(message.kwargs),
            task_id=message.task_id,
            queue=theirs,
        )

    got, sent = _get_raw(app, ours, 5), _get_raw(app, theirs, 5)
    assert [m.headers["id"] for m in got] == [m.task_id for m in messages]  # in order
    for message, ours_raw, theirs_raw in zip(messages, got, sent, strict=True):
        assert ours_raw.headers["task"] == TASK
        assert ours_raw.headers == theirs_raw.headers
        assert ours_raw.properties["correlation_id"] == message.task_id
        assert ours_raw.content_type == theirs_raw.content_type == "application/json"
        args, kwargs, embed = json.loads(ours_raw.body)
        assert (tuple(args), kwargs) == (message.args, message.kwargs)
        assert embed == {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
        assert ours_raw.body == theirs_raw.body
        for props in (ours_raw.properties, theirs_raw.properties):
            props.pop("delivery_tag", None)
            props.get("delivery_info", {}).pop("routing_key", None)
        assert ours_raw.properties == theirs_raw.properties


@pytest.mark.redis
def test_redis_envelopes_are_byte_compatible_with_kombu(
    redis_app: Celery, make_redis_queue: Callable[[], str]
) -> None:
    """The JSON text in the Redis list equals what kombu writes for send_task."""
    app = redis_app
    ours, theirs = make_redis_queue(), make_redis_queue()
    message = _messages(ours, 1)[0]
    publish_batch(app, [message])
    app.send_task(TASK, message.args, dict(message.kwargs), task_id=message.task_id, queue=theirs)
    with app.connection_for_write() as conn:
        client = conn.default_channel.client
        (mine,), (kombus,) = client.lrange(ours, 0, -1), client.lrange(theirs, 0, -1)
    mine, kombus = json.loads(mine), json.loads(kombus)
    for envelope in (mine, kombus):
        envelope["properties"].pop("delivery_tag")
        envelope["properties"]["delivery_info"].pop("routing_key")
    assert mine == kombus
    assert json.loads(base64.b64decode(mine["body"]))[0] == list(message.args)


@pytest.mark.redis
def test_redis_priorities_go_to_sub_lists_and_are_counted(
    redis_app: Celery, make_redis_queue: Callable[[], str]
) -> None:
    app = redis_app
    queue = make_redis_queue()
    messages = [
        Message(str(uuid.uuid4()), TASK, queue, (i,), priority=priority)
        for i, priority in enumerate([0, 3, 9, 9, None, 5])
    ]
    publish_batch(app, messages)
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        lengths = {
            step: channel.client.llen(channel._q_for_pri(queue, step))
            for step in channel.priority_steps
        }
    assert lengths == {0: 2, 3: 2, 6: 0, 9: 2}
    assert queue_depth(app, queue) == 6
    # kombu serves step 0 first, then 3, 6, 9; in order within a step
    order = [m.headers["id"] for m in _get_raw(app, queue, 6)]
    assert order == [messages[i].task_id for i in (0, 4, 1, 5, 2, 3)]


def test_errors_are_scheduler_errors() -> None:
    from swh_like_scheduler.broker import BrokerError, PublishError, QueueDepthError

    assert issubclass(PublishError, BrokerError)
    assert issubclass(QueueDepthError, BrokerError)
    assert issubclass(BrokerError, SchedulerError)
