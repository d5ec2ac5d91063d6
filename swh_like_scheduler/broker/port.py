"""The two things a runner pass asks of a broker: how many messages wait in
some queues, and to send messages. :class:`CeleryBroker` does both on a
Celery app's broker (one kombu connection); another implementation (the
simulator's queues) plugs in where a pass takes a ``broker``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from celery import Celery

from .depth import queue_depths
from .message import Message
from .publish import publish_batch


class QueuePort(Protocol):
    """A broker as a runner pass sees it."""

    def depths(self, queues: Sequence[str]) -> dict[str, int]:
        """``{queue: messages waiting}`` for each of ``queues`` (0 for a
        queue that does not exist); raises :class:`~.errors.BrokerError`
        when the broker cannot tell."""
        ...

    def publish(self, messages: Sequence[Message]) -> int:
        """Send ``messages`` in order; how many were sent. Raises
        :class:`~.errors.PublishError` (with how many went out first)."""
        ...


@dataclass(frozen=True)
class CeleryBroker:
    """:class:`QueuePort` on ``app``'s broker, over ``connection`` (a kombu
    connection kept open by its owner; ``None``: one per call)."""

    app: Celery
    connection: Any = None

    def depths(self, queues: Sequence[str]) -> dict[str, int]:
        return queue_depths(self.app, queues, connection=self.connection)

    def publish(self, messages: Sequence[Message]) -> int:
        return publish_batch(self.app, messages, connection=self.connection)
