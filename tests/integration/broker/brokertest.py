"""Helpers of the broker-layer tests (imported by the tests and their conftest)."""

from __future__ import annotations

import contextlib
import itertools

from celery import Celery
from hypothesis import strategies as st

_counter = itertools.count()

#: what a task's JSON arguments decode to (args and kwargs of a call)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=20,
)
call_args = st.lists(json_values, max_size=4)
call_kwargs = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
task_ids = st.uuids().map(str) | st.text(min_size=1, max_size=40)
#: Celery's (hard, soft) time limits as the runner sets them, or none
time_limits = st.just((None, None)) | st.floats(0.5, 86_400).map(lambda soft: (soft + 10, soft))


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
