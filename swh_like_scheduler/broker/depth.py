"""How many messages wait in a broker queue, through the broker protocol.

A passive ``queue_declare`` returns the number of messages ready in the
queue (not those delivered to a worker and not yet acknowledged).  On
RabbitMQ this is plain AMQP: no management plugin.  On kombu's Redis
transport it is the sum of the lengths of the queue's list and of its
priority-step lists.  A queue that does not exist has depth 0: on Redis an
empty queue has no list at all, and on AMQP it may simply not be declared
yet.  AMQP closes a channel whose passive declare fails, so depths are read
on a channel of their own there, replaced after each missing queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from typing import Any

from celery import Celery
from kombu import Connection

from swh_like_scheduler.broker.connection import connection_scope, describe, error_text
from swh_like_scheduler.broker.errors import QueueDepthError

_NOT_FOUND = 404


def queue_depth(app: Celery, queue: str, *, connection: Connection | None = None) -> int:
    """Messages waiting in ``queue`` (0 if it does not exist).

    Raises :class:`QueueDepthError` if the broker cannot be reached or
    refuses the query.  ``connection`` is reused (and kept open) if given.
    """
    return queue_depths(app, [queue], connection=connection)[queue]


def queue_depths(
    app: Celery, queues: Iterable[str], *, connection: Connection | None = None
) -> dict[str, int]:
    """``{queue: messages waiting}`` for each of ``queues``, on one connection."""
    names = list(dict.fromkeys(queues))
    depths: dict[str, int] = {}
    if not names:
        return depths
    where = describe(app, connection)
    current = ""
    try:
        with connection_scope(app, connection) as conn:
            # AMQP closes a channel on a failed declare: use one of our own
            dedicated = conn.transport.driver_type == "amqp"
            channel = conn.channel() if dedicated else conn.default_channel
            try:
                for current in names:
                    try:
                        depths[current] = _declared_depth(channel, current)
                    except conn.channel_errors as exc:
                        if not _is_not_found(exc):
                            raise
                        depths[current] = 0
                        if dedicated:
                            _close(channel)
                            channel = conn.channel()
            finally:
                if dedicated:
                    _close(channel)
    except Exception as exc:
        raise QueueDepthError(
            f"could not read the depth of queue {current or names[0]!r} on {where}: "
            f"{error_text(exc)}"
        ) from exc
    return depths


def _declared_depth(channel: Any, queue: str) -> int:
    result = channel.queue_declare(queue=queue, passive=True)
    return int(result.message_count)


def _is_not_found(exc: BaseException) -> bool:
    code = getattr(exc, "reply_code", None) or getattr(exc, "code", None)
    if code == _NOT_FOUND:
        return True
    return "NOT_FOUND" in str(exc)


def _close(channel: Any) -> None:
    with suppress(Exception):
        channel.close()
