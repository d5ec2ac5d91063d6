"""Timed notification: publish a JSON payload to a named queue.

The reminder case: a client registers one-shot tasks at ISO-8601 instants
(for instance 90, 60 and 30 minutes before an event), each with the queue to
post to and the message to post; at each instant the runner dispatches the
task and this worker publishes the payload, which the client's own consumer
turns into a push notification, an e-mail, ...

Delivery is at least once. The message carries the run's Celery task id as
its ``message_id`` property and in the ``swh-task-id`` header: a redelivered
or re-published run publishes again under the same id, so a consumer that
remembers the ids it has handled drops the copies. The optional ``key`` goes
in the ``swh-key`` header; give one that is unique per notification (a job
key and its instant, say) to drop copies across retries too, which run under
new ids.

The target queue is declared durable (on the broker's default exchange,
routed by its name) and the message is persistent; on RabbitMQ, publisher
confirms are on, so the task only succeeds once the broker holds the message.
A queue that already exists with other arguments (``x-max-priority``, ...)
refuses the declaration: pass ``declare=False`` then.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from celery import Task, shared_task
from kombu import Exchange, Producer, Queue

from swh_like_scheduler.worker import SchedulerTask

TASK_NAME = "swh_like_workers.notify.notify"

#: message headers set on every notification
TASK_ID_HEADER = "swh-task-id"
KEY_HEADER = "swh-key"
PUBLISHED_AT_HEADER = "swh-published-at"

#: connection and publish retries before the run fails (it is then retried
#: by the scheduler, under the task type's retry policy)
PUBLISH_RETRY_POLICY = {
    "max_retries": 3,
    "interval_start": 0.2,
    "interval_step": 0.5,
    "interval_max": 2.0,
}
#: AMQP's limit on a queue name, in bytes
MAX_QUEUE_NAME = 255


def input_problem(queue: Any, payload: Any, key: Any) -> str | None:
    """Why these arguments cannot be published, or None."""
    if not isinstance(queue, str) or not queue.strip():
        return f"queue must be a non-empty string, not {queue!r}"
    if len(queue.encode()) > MAX_QUEUE_NAME:
        return f"queue name is longer than {MAX_QUEUE_NAME} bytes"
    if queue.startswith("amq."):
        return f"queue {queue!r}: names starting with 'amq.' are reserved by the broker"
    if not isinstance(payload, dict):
        return f"payload must be a JSON object, not {type(payload).__name__}"
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"payload is not JSON: {exc}"
    if key is not None and not isinstance(key, str):
        return f"key must be a string, not {type(key).__name__}"
    return None


def target_queue(name: str) -> Queue:
    """The queue notifications to ``name`` go to, as declared by the worker
    (a consumer declaring it the same way avoids a mismatch)."""
    return Queue(name, exchange=Exchange(""), routing_key=name, durable=True)


@shared_task(name=TASK_NAME, bind=True, base=SchedulerTask)
def notify(
    self: Task,
    queue: str,
    payload: dict[str, Any],
    key: str | None = None,
    declare: bool = True,
) -> dict[str, Any]:
    """Publish ``payload`` (a JSON object) to ``queue`` on the app's broker.

    Returns ``{"status": "eventful", "queue", "message_id", "key"}``; bad
    arguments give ``permfailed``; a broker that cannot be reached raises.
    """
    problem = input_problem(queue, payload, key)
    if problem is not None:
        return {"status": "permfailed", "queue": queue, "error": problem}
    message_id = self.request.id or str(uuid.uuid4())
    headers = {
        TASK_ID_HEADER: message_id,
        PUBLISHED_AT_HEADER: datetime.now(tz=UTC).isoformat(),
    }
    if key is not None:
        headers[KEY_HEADER] = key
    target = target_queue(queue)
    with self.app.connection_for_write(transport_options={"confirm_publish": True}) as conn:
        conn.ensure_connection(**PUBLISH_RETRY_POLICY)
        producer = Producer(conn, auto_declare=False)
        producer.publish(
            payload,
            exchange="",
            routing_key=queue,
            serializer="json",
            delivery_mode=2,
            declare=[target] if declare else [],
            headers=headers,
            message_id=message_id,
            retry=True,
            retry_policy=PUBLISH_RETRY_POLICY,
        )
    return {"status": "eventful", "queue": queue, "message_id": message_id, "key": key}


def register() -> dict[str, Any]:
    """Entry point of the ``swh.workers`` group (see :mod:`swh_like_workers.sleep`)."""
    return {
        "task_modules": [__name__],
        "task_types": [
            {
                "type": "notify",
                "backend_name": TASK_NAME,
                "description": "Publish a JSON payload to a named queue at given instants",
                "max_queue_length": 100_000,
                # 30 s, 1 min, 2 min, 4 min: a reminder is late by minutes, not hours
                "num_retries": 4,
                "retry_delay": "30 seconds",
                "retry_growth": 2.0,
                "retry_cap": "10 min",
                "max_expected_duration": "30 seconds",
                "max_allowed_duration": "5 min",
            }
        ],
    }
