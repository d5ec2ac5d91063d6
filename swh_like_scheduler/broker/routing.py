"""Where a task message of a given queue goes, decided as Celery decides it."""

from __future__ import annotations

from dataclasses import dataclass

from celery import Celery
from kombu import Queue
from kombu.entity import maybe_delivery_mode


@dataclass(frozen=True)
class Route:
    """The exchange and routing key ``send_task(..., queue=name)`` publishes to.

    ``queue`` is the app's declaration of the queue (``task_queues``, or one
    created on the fly when ``task_create_missing_queues`` is on, the
    default).  A direct exchange is replaced by the default (anonymous)
    exchange with the queue name as routing key, as Celery does.
    """

    name: str
    queue: Queue
    exchange: str
    routing_key: str
    delivery_mode: int


def resolve_route(app: Celery, name: str) -> Route:
    """The route of queue ``name``; ``KeyError`` if the app does not know it
    and may not create it."""
    queue: Queue = app.amqp.queues[name]
    exchange = queue.exchange
    delivery_mode = maybe_delivery_mode(
        getattr(exchange, "delivery_mode", None) or app.conf.task_default_delivery_mode
    )
    exchange_type = getattr(exchange, "type", None) or "direct"
    if exchange_type == "direct":
        return Route(name, queue, "", name, delivery_mode)
    return Route(
        name,
        queue,
        exchange.name or app.amqp.default_exchange.name,
        queue.routing_key or app.conf.task_default_routing_key,
        delivery_mode,
    )
