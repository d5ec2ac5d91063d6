"""The runner's link to the Celery broker (Redis or RabbitMQ).

- :func:`publish_batch` sends many task messages at once, as ordinary Celery
  protocol-2 messages whose task id is the run's ``backend_id``;
- :func:`queue_depth` / :func:`queue_depths` read how many messages wait in
  a queue, over the broker protocol (no RabbitMQ management plugin);
- :class:`PublishError` / :class:`QueueDepthError` (both
  :class:`BrokerError`) are what they raise.

Nothing here builds a Celery app or reads the environment: callers pass
their app (and, to reuse it, a kombu connection).
"""

from swh_like_scheduler.broker.depth import queue_depth, queue_depths
from swh_like_scheduler.broker.errors import BrokerError, PublishError, QueueDepthError
from swh_like_scheduler.broker.message import Message
from swh_like_scheduler.broker.publish import publish_batch

__all__ = [
    "BrokerError",
    "Message",
    "PublishError",
    "QueueDepthError",
    "publish_batch",
    "queue_depth",
    "queue_depths",
]
