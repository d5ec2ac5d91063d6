"""The listener's queue receives only the events it records (RabbitMQ bindings)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from celery.events.event import get_exchange
from kombu import Queue
from listenertest import broker, make_test_app, options, unique_queue_name
from waiting import delete_queues

from swh_like_scheduler.listener.consumer import (
    ALL_EVENTS,
    RECORDED_ROUTING_KEYS,
    ListenerOptions,
    ListenerReceiver,
)

pytestmark = [pytest.mark.rabbitmq]

#: one event of each kind a worker or a client sends one by one
SENT = ("task-sent", "task-received", "task-started", "task-succeeded", "worker-heartbeat")
#: those of them the listener's queue receives
RECORDED_OF_SENT = ["task-started", "task-succeeded", "worker-heartbeat"]


def declare(app: Any, listener_options: ListenerOptions) -> None:
    """Declare (and bind) the listener's queue as a listener session does."""
    with app.connection_for_read() as conn:
        receiver = ListenerReceiver(
            conn, app=app, options=listener_options, on_events=lambda *_: None
        )
        with receiver.Consumer():
            pass


def publish_one_of_each(app: Any) -> None:
    with app.connection_for_write() as conn:
        dispatcher = app.events.Dispatcher(conn)
        backend_id = str(uuid.uuid4())
        for kind in SENT:
            dispatcher.send(kind, uuid=backend_id, result="{'status': 'eventful'}")
        dispatcher.close()


def queued_types(app: Any, queue_name: str) -> list[str]:
    """The types of the events in the queue (taken off it), waiting up to
    a few seconds for the last to be routed."""
    types: list[str] = []
    deadline = time.monotonic() + 5
    with app.connection_for_read() as conn:
        channel = conn.channel()
        while time.monotonic() < deadline:
            message = channel.basic_get(queue_name, no_ack=True)
            if message is None:
                time.sleep(0.05)
                continue
            body = json.loads(message.body)
            types.extend(e["type"] for e in (body if isinstance(body, list) else [body]))
            if "worker-heartbeat" in types:  # sent last: the rest are in
                break
    return types


def test_the_queue_receives_only_recorded_events() -> None:
    app = make_test_app(broker("rabbitmq"))
    queue_name = unique_queue_name()
    try:
        declare(app, options(queue_name))
        publish_one_of_each(app)
        assert queued_types(app, queue_name) == RECORDED_OF_SENT
    finally:
        delete_queues(app, queue_name)


def test_a_queue_bound_to_every_event_by_an_older_version_loses_that_binding() -> None:
    app = make_test_app(broker("rabbitmq"))
    queue_name = unique_queue_name()
    try:
        with app.connection_for_write() as conn:  # as an older version declared it
            old = Queue(
                queue_name,
                exchange=get_exchange(conn, name="celeryev"),
                routing_key="#",
                durable=True,
                auto_delete=False,
            )
            old(conn.default_channel).declare()
        publish_one_of_each(app)
        assert "task-received" in queued_types(app, queue_name)  # "#" is bound
        declare(app, options(queue_name))
        publish_one_of_each(app)
        assert queued_types(app, queue_name) == RECORDED_OF_SENT
    finally:
        delete_queues(app, queue_name)


def test_every_event_can_still_be_asked_for() -> None:
    app = make_test_app(broker("rabbitmq"))
    queue_name = unique_queue_name()
    try:
        declare(app, options(queue_name))  # bound to the recorded keys first
        declare(app, options(queue_name, routing_keys=ALL_EVENTS))
        publish_one_of_each(app)
        # "#" and the recorded keys both match: still one copy of each
        assert queued_types(app, queue_name) == list(SENT)
    finally:
        delete_queues(app, queue_name)


def test_the_recorded_keys_cover_every_event_the_listener_records() -> None:
    from swh_like_scheduler.listener.events import TASK_EVENT_KINDS, EventKind

    recorded = {t for t, kind in TASK_EVENT_KINDS.items() if kind is not EventKind.NOTHING}
    assert {t.replace("-", ".") for t in recorded} <= set(RECORDED_ROUTING_KEYS)
    assert "task.received" not in RECORDED_ROUTING_KEYS
    assert {"task.multi", "worker.heartbeat", "worker.online", "worker.offline"} <= set(
        RECORDED_ROUTING_KEYS
    )
