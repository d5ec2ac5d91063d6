"""A stock Celery worker executes what publish_batch sent, each message once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.contrib.testing.worker import start_worker

from swh_like_scheduler.broker import Message, publish_batch


def test_a_real_worker_runs_every_message_exactly_once(
    app: Celery, make_queue: Callable[[], str]
) -> None:
    executed: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    lock = threading.Lock()
    name = f"swh_like_scheduler.tests.broker.record_{uuid.uuid4().hex}"

    @app.task(name=name, bind=True, shared=False)
    def record(self: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
        with lock:
            executed.append((self.request.id, args, kwargs))
        return {"status": "eventful"}

    first, second = make_queue(), make_queue()
    messages = [
        Message(
            task_id=f"run-{uuid.uuid4()}",
            task_name=name,
            queue=first if i % 3 else second,
            args=(f"https://example.org/{i}", i),
            kwargs={"n": i, "flag": i % 2 == 0},
        )
        for i in range(300)
    ]
    assert publish_batch(app, messages) == len(messages)

    with start_worker(
        app,
        pool="solo",
        perform_ping_check=False,
        queues=[first, second],
        loglevel="WARNING",
        shutdown_timeout=10,
    ):
        deadline = time.monotonic() + 20
        while len(executed) < len(messages) and time.monotonic() < deadline:
            time.sleep(0.05)
        # nothing more arrives after a short while either
        settle = time.monotonic() + 0.3
        while time.monotonic() < settle:
            time.sleep(0.05)

    ids = [task_id for task_id, _, _ in executed]
    assert len(ids) == len(set(ids)) == len(messages)
    by_id = {task_id: (args, kwargs) for task_id, args, kwargs in executed}
    for message in messages:
        assert by_id[message.task_id] == (message.args, dict(message.kwargs))
