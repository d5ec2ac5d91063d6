"""Envelopes filled from a template are byte for byte those built field by
field (which ``test_publish`` compares with kombu's own)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import services
from brokertest import call_args, call_kwargs, make_app, task_ids, time_limits
from hypothesis import given, settings
from hypothesis import strategies as st

from swh_like_scheduler.broker import Message
from swh_like_scheduler.broker.fastjson import one_shot_encoder
from swh_like_scheduler.broker.redis_fast import _encode_json, _Envelopes
from swh_like_scheduler.broker.redis_template import EnvelopeTemplate
from swh_like_scheduler.broker.routing import resolve_route
from swh_like_scheduler.broker.taskmsg import TaskMessageBuilder

pytestmark = pytest.mark.redis

TASK = "swh_like_scheduler.tests.broker.record"
QUEUE = "swh-template-test"


@pytest.fixture(scope="module")
def channel() -> Iterator[Any]:
    app = make_app(services.require("redis", services.redis_url))
    with app.connection_for_write() as connection:
        yield app, connection.default_channel


def _both(app: Any, channel: Any, message: Message) -> tuple[str, str]:
    """(filled from the template, built field by field) for ``message``."""
    routes = {message.queue: resolve_route(app, message.queue)}
    texts = []
    for use_template in (True, False):
        envelopes = _Envelopes(channel, TaskMessageBuilder(app), routes, "json")
        if not use_template:
            which = (message.task_name, message.queue, message.priority, message.time_limits)
            envelopes._templates[which] = None
        envelopes.tags = iter(["a0c1e3f4-0000-4000-8000-000000000001"])
        [(_key, [text])] = envelopes.grouped([message])
        texts.append(text)
    return texts[0], texts[1]


@settings(max_examples=300, deadline=None)
@given(
    args=call_args,
    kwargs=call_kwargs,
    priority=st.none() | st.integers(0, 9),
    task_id=task_ids,
    limits=time_limits,
)
def test_filled_envelopes_equal_built_ones(
    channel: Any,
    args: list[Any],
    kwargs: dict[str, Any],
    priority: int | None,
    task_id: str,
    limits: tuple[float | None, float | None],
) -> None:
    app, chan = channel
    message = Message(task_id, TASK, QUEUE, tuple(args), kwargs, priority, limits)
    filled, built = _both(app, chan, message)
    assert filled == built
    envelope = json.loads(filled)
    assert envelope["headers"]["id"] == task_id


def test_a_template_is_made_for_json_and_refused_otherwise(channel: Any) -> None:
    app, chan = channel
    routes = {QUEUE: resolve_route(app, QUEUE)}
    message = Message("id-1", TASK, QUEUE, (1,), {})
    assert _Envelopes(chan, TaskMessageBuilder(app), routes, "json").template(message)
    assert _Envelopes(chan, TaskMessageBuilder(app), routes, "pickle").template(message) is None
    # a body codec that does not give kombu's JSON in base64: no template
    envelope = {"body": "\x00body\x00", "headers": {}}
    assert EnvelopeTemplate.create(envelope, _encode_json, lambda body: "other") is None


def test_a_marker_lost_in_encoding_means_no_template() -> None:
    envelope = {"body": "\x00body\x00", "headers": {"id": "\x00id\x00"}}  # no argsrepr...
    with pytest.raises(ValueError, match="lost a marker"):
        EnvelopeTemplate(_encode_json(envelope), _encode_json)


def test_the_one_shot_encoder_equals_json_dumps() -> None:
    encode = one_shot_encoder(json.JSONEncoder())
    value = [{"b": 1.5, "a": ["\u00e9", None, True]}, -0.0, 10**30, "\"'\\"]
    assert encode(value) == json.dumps(value)
    # an encoder it cannot reproduce is used as it is
    pretty = json.JSONEncoder(indent=2)
    assert one_shot_encoder(pretty) == pretty.encode
