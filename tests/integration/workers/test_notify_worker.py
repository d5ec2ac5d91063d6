"""The timed notification on a real worker: the payload reaches the named queue."""

from __future__ import annotations

from typing import Any

import pytest
from kombu import Connection
from workertest import delete_queues, make_test_app, unique_queue, worker

from swh_like_workers.notify import TASK_NAME, target_queue

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]


def test_the_payload_arrives_once_per_run_id(broker_url: str) -> None:
    app = make_test_app(broker_url)
    tasks, target = unique_queue("notify"), unique_queue("notify-target")
    payload = {"training": "4f1c", "questionnaire": "pre", "minutes_before": 90}
    key = "training-invitations-4f1c@2026-03-01T10:30:00Z"
    kwargs: dict[str, Any] = {"queue": target, "payload": payload, "key": key}
    try:
        with worker(app, tasks):
            sent = app.send_task(TASK_NAME, kwargs=kwargs, queue=tasks)
            first = sent.get(timeout=15)
            # the same run delivered again (a redelivery, a re-publication)
            again = app.send_task(TASK_NAME, kwargs=kwargs, queue=tasks, task_id=sent.id)
            second = again.get(timeout=15)
            bad = app.send_task(TASK_NAME, kwargs={**kwargs, "payload": [1]}, queue=tasks)
            refused = bad.get(timeout=15)

        expected = {"status": "eventful", "queue": target, "message_id": sent.id, "key": key}
        assert first == second == expected
        assert refused["status"] == "permfailed" and "JSON object" in refused["error"]

        with Connection(broker_url) as conn:
            inbox = conn.SimpleQueue(target_queue(target))
            messages = [inbox.get(timeout=5) for _ in range(2)]
            with pytest.raises(inbox.Empty):
                inbox.get(timeout=0.3)
            for message in messages:
                message.ack()
                assert message.payload == payload
                assert message.content_type == "application/json"
                assert message.properties["message_id"] == sent.id
                assert message.properties["delivery_mode"] == 2
                assert message.headers["swh-task-id"] == sent.id
                assert message.headers["swh-key"] == key
            inbox.close()
    finally:
        delete_queues(app, target)


def test_without_a_key_and_to_an_existing_queue(broker_url: str) -> None:
    app = make_test_app(broker_url)
    tasks, target = unique_queue("notify"), unique_queue("notify-target")
    try:
        with Connection(broker_url) as conn:
            inbox = conn.SimpleQueue(target_queue(target))  # the consumer came first
            with worker(app, tasks):
                sent = app.send_task(
                    TASK_NAME, args=(target, {"n": 1}), kwargs={"declare": False}, queue=tasks
                )
                assert sent.get(timeout=15)["key"] is None
            message = inbox.get(timeout=5)
            message.ack()
            assert message.payload == {"n": 1}
            assert "swh-key" not in message.headers
            assert message.properties["message_id"] == sent.id
            inbox.close()
    finally:
        delete_queues(app, target)
