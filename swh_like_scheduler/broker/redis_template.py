"""The envelope text of one kind of message, with holes for what differs.

Messages of one task name to one Redis list differ in five places only: the
body (the call's arguments), the task id (``id``, ``root_id`` and
``correlation_id``), ``argsrepr``, ``kwargsrepr`` and the delivery tag.
:class:`EnvelopeTemplate` encodes the envelope once with a marker in each of
those places and turns the text into a format string; a message then costs
one ``format_map`` with its five JSON strings instead of encoding a nested
dict of twenty-odd keys (two thirds of the time of building an envelope).

The text it gives is the one the generic path gives for the same message
(``tests/integration/broker/test_redis_template.py`` checks it byte for
byte). :meth:`EnvelopeTemplate.create` returns ``None`` when it cannot promise
that: a serializer other than kombu's JSON, a body encoding other than
base64, or headers in which a marker does not survive encoding.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring_ascii
from typing import Any

from swh_like_scheduler.broker.fastjson import PROBE
from swh_like_scheduler.broker.taskmsg import EMBED, HOLES


def base64_text(data: str) -> str:
    """kombu's base64 body codec: the base64 of the UTF-8 bytes, as text."""
    return binascii.b2a_base64(data.encode("utf-8"), newline=False).decode("ascii")


class EnvelopeTemplate:
    """Fills the envelope text of one kind of message."""

    def __init__(self, text: str, encode_json: Callable[[Any], str]) -> None:
        quoted = {encode_json(marker): name for name, marker in HOLES.items()}
        pieces = re.split("(" + "|".join(map(re.escape, quoted)) + ")", text)
        #: which hole each ``%s`` of the pattern is, in order
        self._order = tuple(quoted[piece] for piece in pieces[1::2])
        if set(self._order) != set(HOLES):
            raise ValueError("the envelope lost a marker")
        if any("\\u0000" in piece for piece in pieces[::2]):
            raise ValueError("the envelope holds a marker in an unexpected place")
        self._pattern = "%s".join(piece.replace("%", "%%") for piece in pieces[::2])
        self._encode_json = encode_json

    @classmethod
    def create(
        cls,
        envelope: Mapping[str, Any],
        encode_json: Callable[[Any], str],
        encode_body: Callable[[Any], str],
    ) -> EnvelopeTemplate | None:
        """The template of ``envelope`` (built for a message whose fields
        hold :data:`HOLES`), or ``None`` if the fast fill would not give the
        text ``encode_json`` gives. ``encode_body`` is the generic path's
        body encoding (serializer, then body codec) of a ``(args, kwargs,
        embed)`` body."""
        args, kwargs = PROBE[0], PROBE[1]
        if encode_body((args, kwargs, dict(EMBED))) != base64_text(
            encode_json((args, kwargs, EMBED))
        ):
            return None
        try:
            return cls(encode_json(envelope), encode_json)
        except ValueError:
            return None

    def fill(
        self,
        task_id: str,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        reprs: tuple[str, str],
        tag: str,
    ) -> str:
        """The envelope text of one message."""
        body = base64_text(self._encode_json((args, kwargs, EMBED)))
        values = {
            "body": '"' + body + '"',
            "id": encode_basestring_ascii(task_id),
            "argsrepr": encode_basestring_ascii(reprs[0]),
            "kwargsrepr": encode_basestring_ascii(reprs[1]),
            "tag": encode_basestring_ascii(tag),
        }
        return self._pattern % tuple(map(values.__getitem__, self._order))
