"""Helpers of the broker-layer tests (imported by the tests and their conftest)."""

from __future__ import annotations

import contextlib
import itertools

from celery import Celery

_counter = itertools.count()


def cleanup_queue(app: Celery, name: str) -> None:
    """Delete queue ``name`` and what the broker keeps beside it."""
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        if conn.transport.driver_type == "redis":
            client = channel.client
            steps = channel.priority_steps
            client.delete(
                *{channel._q_for_pri(name, step) for step in steps},
                f"_kombu.binding.{name}",
                f"_kombu.binding_permanent.{name}",
            )
            return
        with contextlib.suppress(Exception):
            channel.queue_delete(name)
        channel = conn.channel()
        with contextlib.suppress(Exception):
            channel.exchange_delete(name)


def make_app(url: str) -> Celery:
    """A Celery app on ``url`` configured like the product's workers."""
    app = Celery(f"broker-tests-{next(_counter)}", broker=url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_backend=None,
        task_always_eager=False,
        broker_connection_retry_on_startup=False,
        worker_hijack_root_logger=False,
        # AMQP heartbeats put a timer in the embedded worker's event loop, so
        # it notices a stop request (and new messages) in well under a second
        broker_heartbeat=2,
    )
    return app
