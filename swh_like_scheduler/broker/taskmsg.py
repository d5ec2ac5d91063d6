"""Celery protocol-2 task messages, as ``app.send_task`` lays them out.

:meth:`celery.app.amqp.AMQP.as_task_v2` spends most of its time on things
that are the same for every message of a batch (configuration look-ups, the
node name, the shape of the headers).  :class:`TaskMessageBuilder` calls it
once per task name to get a template and then fills in, for each message,
the fields that differ: the task id (``id`` and ``root_id`` headers,
``correlation_id`` property), ``argsrepr``/``kwargsrepr`` (equal to Celery's
``saferepr`` with the app's limits, see :mod:`.argsrepr`) and the body.  The result is equal to
what ``app.send_task(name, args, kwargs, task_id=..., queue=...)`` passes to
the producer (``tests/integration/broker`` checks it field by field).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celery import Celery

from swh_like_scheduler.broker.argsrepr import safe_repr
from swh_like_scheduler.broker.message import Message

#: ``(headers, properties, body)`` as handed to ``kombu.Producer.publish``.
TaskMessage = tuple[dict[str, Any], dict[str, Any], tuple[Any, ...]]

_EMBED_KEYS = ("callbacks", "errbacks", "chain", "chord")

#: The third element of a protocol-2 body as :meth:`TaskMessageBuilder.build`
#: makes it (no callbacks, errbacks, chain or chord); not to be changed.
EMBED: Mapping[str, None] = dict.fromkeys(_EMBED_KEYS)

#: What the fields that differ from message to message hold while a
#: template of a kind of message is encoded (NUL characters, which Celery
#: never puts in these fields; JSON writes them ``\u0000``).
HOLES = {
    "body": "\x00body\x00",
    "id": "\x00id\x00",
    "argsrepr": "\x00argsrepr\x00",
    "kwargsrepr": "\x00kwargsrepr\x00",
    "tag": "\x00tag\x00",
}


class TaskMessageBuilder:
    """Builds protocol-2 messages for one Celery app; not thread-safe.

    Cheap to create; keep one per batch (or per thread) so the templates
    are computed once per task name.
    """

    def __init__(self, app: Celery) -> None:
        if int(app.conf.task_protocol) != 2:
            raise ValueError(
                f"only Celery task protocol 2 is supported, the app uses {app.conf.task_protocol}"
            )
        self._amqp = app.amqp
        self._reply_to: str = app.thread_oid
        self._args_max: int = app.amqp.argsrepr_maxsize
        self._kwargs_max: int = app.amqp.kwargsrepr_maxsize
        self._maxlevels: int = app.conf.task_repr_maxlevels
        self._templates: dict[str, dict[str, Any]] = {}

    def _template(self, task_name: str) -> dict[str, Any]:
        template = self._templates.get(task_name)
        if template is None:
            # Same call as Celery.send_task makes (protocol 2, no options).
            headers, _properties, _body, _event = self._amqp.as_task_v2(
                "", task_name, (), {}, reply_to=self._reply_to, ignore_result=None
            )
            template = self._templates[task_name] = headers
        return template

    def reprs(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, str]:
        """The ``argsrepr`` and ``kwargsrepr`` headers of a call."""
        return (
            safe_repr(args, self._args_max, self._maxlevels),
            safe_repr(kwargs, self._kwargs_max, self._maxlevels),
        )

    def build(self, message: Message) -> TaskMessage:
        """The headers, properties and body of ``message``."""
        task_id = message.task_id
        args = message.args
        kwargs = message.kwargs
        if not isinstance(kwargs, dict):
            kwargs = dict(kwargs)
        headers = self._template(message.task_name).copy()
        headers["id"] = task_id
        headers["root_id"] = task_id
        headers["argsrepr"], headers["kwargsrepr"] = self.reprs(args, kwargs)
        # fresh mutable values: a publish-signal receiver may change them
        headers["timelimit"] = list(message.time_limits)
        headers["stamps"] = {}
        properties = {"correlation_id": task_id, "reply_to": self._reply_to}
        embed: dict[str, Any] = dict.fromkeys(_EMBED_KEYS)
        return headers, properties, (args, kwargs, embed)


def reference_message(app: Celery, message: Message) -> TaskMessage:
    """The message built by Celery itself (slow; for tests and checks)."""
    kwargs: Mapping[str, Any] = message.kwargs
    headers, properties, body, _event = app.amqp.as_task_v2(
        message.task_id,
        message.task_name,
        message.args,
        dict(kwargs),
        reply_to=app.thread_oid,
        ignore_result=None,
        time_limit=message.time_limits[0],
        soft_time_limit=message.time_limits[1],
    )
    return headers, properties, body
