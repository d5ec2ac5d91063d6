"""A worker keeps running when its Redis broker goes away with messages unacked.

The crash this prevents (kombu 5.7.0 with celery 5.7.0, every pool; reproduced
by ``tests/faults/test_broker_lost.py``): a worker holds unacknowledged
messages (``task_acks_late``: the bodies under way) and has a free slot, so a
``BRPOP`` is waiting on its task channel, when Redis shuts down. Celery's
consumer then tears the connection down twice, and kombu's Redis channel
survives the first pass half closed:

1. ``Connection.collect()`` closes the task channel: its close first reads
   the pending ``BRPOP`` reply, which raises ``ConnectionError`` before the
   channel is marked closed (swallowed); kombu then closes the connection's
   other channels in turn and gives up at the first whose close needs the
   server (the control channel's fanout queue): the task channel is never
   closed, and the transport is detached from its connection
   (``transport.client = None``).
2. ``Connection.close()`` closes the task channel again. It now gives its
   unacknowledged messages back (``restore_unacked``), which needs a new
   connection pool, whose parameters are read from ``transport.client``:
   ``AttributeError: 'NoneType' object has no attribute 'hostname'``. That
   is not a connection error, so it escapes Celery's reconnect handling:
   ``Unrecoverable error``, and the worker exits (code 1) once its bodies end.

The same detached channel raises the same ``AttributeError`` when Celery acks
a body that ended after the loss (``Couldn't ack`` is what Celery logs for a
connection error there).

With :func:`install`, such a channel goes on as one kombu closed in order
does: it keeps the connection parameters it last built its pool from, and
a detached channel builds its new pool from them instead of from the
transport, so it tries to give its unacknowledged messages back, and later
acks the bodies that end, on the server itself. While Redis is down that
fails with a ``ConnectionError``, which Celery and kombu treat as
"connection lost": the close is abandoned, the worker reconnects, and the
messages stay in Redis's ``unacked`` set (if it kept its data) until they
are acked or kombu puts them back in their queue after the visibility
timeout. A detached channel without such parameters (none built yet, a
Sentinel channel, the event loop's pool) raises :class:`ChannelDetached`,
a redis-py ``ConnectionError``, to the same effect. A warning says which,
once per channel. Nothing changes for a channel that has its connection,
nor on RabbitMQ.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import redis

logger = logging.getLogger(__name__)

#: set on the patched method, so :func:`install` applies it once
_MARK = "_swh_detached_check"
#: on a channel: the parameters its last synchronous pool was built from
_LAST = "_swh_last_connparams"
#: on a channel: its warning was logged
_SAID = "_swh_detached_said"


class ChannelDetached(redis.exceptions.ConnectionError):
    """A kombu Redis channel used after its connection was torn down."""


def _held(channel: Any) -> int:
    """How many messages the channel delivered and holds unacknowledged."""
    qos = vars(channel).get("_qos")
    delivered = getattr(qos, "_delivered", None)
    dirty = getattr(qos, "_dirty", ())
    return max(0, len(delivered) - len(dirty)) if delivered is not None else 0


def _say(channel: Any, *, reused: bool) -> None:
    if vars(channel).get(_SAID):
        return
    setattr(channel, _SAID, True)
    logger.warning(
        "the Redis connection was lost while this worker held %d unacknowledged message(s) "
        "on a channel kombu had already detached from it: %s (while Redis is down they stay "
        "in its unacked set and return to their queue after the visibility timeout, %s s); "
        "the worker reconnects",
        _held(channel),
        "the channel gives them back, or acks them, with its last connection settings"
        if reused
        else "the channel cannot reach Redis any more",
        getattr(channel, "visibility_timeout", "?"),
    )


def install() -> bool:
    """Patch kombu's Redis channel (:mod:`kombu.transport.redis`) once per
    process; ``True`` when this call applied it."""
    from kombu.transport import redis as transport

    original = transport.Channel._connparams
    if getattr(original, _MARK, False):
        return False
    sentinel = transport.SentinelChannel  # builds its pool from the transport too

    @functools.wraps(original)
    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        owner = self.connection  # the transport; None once kombu closed the channel
        if owner is not None and owner.client is not None:
            params = original(self, asynchronous=asynchronous)
            if not asynchronous:
                setattr(self, _LAST, dict(params))
            return params
        last = vars(self).get(_LAST)
        if last is None or asynchronous or isinstance(self, sentinel):
            _say(self, reused=False)
            raise ChannelDetached(
                "this Redis channel's connection was closed after the broker connection was lost"
            )
        _say(self, reused=True)
        return dict(last)

    setattr(_connparams, _MARK, True)
    transport.Channel._connparams = _connparams  # type: ignore[method-assign]  # the patch
    return True
