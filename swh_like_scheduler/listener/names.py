"""The name of the listener's event queue, and the one earlier versions used.

Listeners of one installation share one queue (several listeners on one
queue share its events); two installations on one broker (one RabbitMQ
vhost) must not, or each takes events of the other's runs, finds no such
run and drops them, and the runs whose end went to the wrong installation
stay open. So the default name carries the installation's id, stored in its
database (:meth:`~swh_like_scheduler.store.SchedulerStore.installation_id`):
the same for every process of the installation, whatever URL it connects
with. ``--queue-name`` still names any queue.

Earlier versions read :data:`LEGACY_QUEUE_NAME` whatever the database. On
RabbitMQ that queue is durable and stays bound after an upgrade: the events
the workers publish keep piling up in it while no listener reads it.
:func:`legacy_queue_left` finds it, so the listener can say so once.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

#: The event queue of every listener before the name came from the database.
LEGACY_QUEUE_NAME = "celeryev.swh-scheduler-listener"
#: Characters of the installation id the default name keeps (48 bits).
ID_CHARS = 12


def event_queue_name(installation_id: str) -> str:
    """The default event queue of the installation ``installation_id``:
    ``celeryev.swh-scheduler-listener.<first 12 characters of the id>``."""
    kept = "".join(ch for ch in installation_id if ch.isalnum())[:ID_CHARS]
    if not kept:
        raise ValueError(f"installation id {installation_id!r} has no usable character")
    return f"{LEGACY_QUEUE_NAME}.{kept.lower()}"


def legacy_queue_left(connection: Any) -> tuple[int, int] | None:
    """On an AMQP ``connection``: ``(messages, consumers)`` of the durable
    queue :data:`LEGACY_QUEUE_NAME` if it exists, else ``None`` (and
    ``None`` on other transports, which keep no queue). Asked on a channel
    of its own (a passive declare of a missing queue closes its channel)."""
    if connection.transport.driver_type != "amqp":
        return None
    errors = tuple(connection.channel_errors)
    channel = connection.channel()
    try:
        _, messages, consumers = channel.queue_declare(queue=LEGACY_QUEUE_NAME, passive=True)
    except errors:
        return None
    finally:
        try:
            channel.close()
        except Exception:  # closed by the broker after a failed declare
            logger.debug("closing the channel of the passive declare failed", exc_info=True)
    return int(messages), int(consumers)


def legacy_queue_warning(left: tuple[int, int], queue_name: str) -> str:
    """What to tell the operator about the old queue still on the vhost."""
    messages, consumers = left
    readers = (
        f"{consumers} consumer(s) still read it (listeners of an earlier version?)"
        if consumers
        else "no one reads it"
    )
    return (
        f"the event queue of earlier versions, {LEGACY_QUEUE_NAME}, is still on this "
        f"vhost with {messages} event(s) and {readers}; this listener reads "
        f"{queue_name}, named after the database's installation id. Once every listener "
        f"of this installation runs this version: apply what waits there with "
        f"`swh scheduler start-listener --once --queue-name {LEGACY_QUEUE_NAME}`, then "
        f"delete it (`rabbitmqctl delete_queue {LEGACY_QUEUE_NAME} -p <vhost>`), or "
        f"keep the old name with --queue-name {LEGACY_QUEUE_NAME}"
    )


__all__ = [
    "ID_CHARS",
    "LEGACY_QUEUE_NAME",
    "event_queue_name",
    "legacy_queue_left",
    "legacy_queue_warning",
]
