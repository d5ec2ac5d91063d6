"""The listener's batch size (larger while events queue up) and how it reads
a message body (plain JSON at once, the rest through kombu)."""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime

import pytest
from kombu.message import Message
from kombu.utils.json import dumps as kombu_dumps

from swh_like_scheduler.listener.consumer import ListenerOptions, decode_body, next_batch_size


def test_a_full_batch_doubles_the_next_up_to_the_largest() -> None:
    sizes = [500]
    for _ in range(4):
        sizes.append(next_batch_size(sizes[-1], full=True, smallest=500, largest=2000))
    assert sizes == [500, 1000, 2000, 2000, 2000]


def test_a_batch_written_after_its_wait_brings_the_size_back() -> None:
    assert next_batch_size(2000, full=False, smallest=500, largest=2000) == 500
    assert next_batch_size(500, full=False, smallest=500, largest=2000) == 500


def test_the_size_never_leaves_its_bounds() -> None:
    assert next_batch_size(1500, full=True, smallest=500, largest=2000) == 2000
    assert next_batch_size(1, full=True, smallest=1, largest=1) == 1
    assert next_batch_size(10, full=True, smallest=500, largest=2000) == 500


def test_options_default_the_largest_batch_and_refuse_a_smaller_one() -> None:
    assert ListenerOptions(batch_size=300).largest_batch == 1200
    assert ListenerOptions(batch_size=300, max_batch_size=300).largest_batch == 300
    with pytest.raises(ValueError, match="max_batch_size"):
        ListenerOptions(batch_size=300, max_batch_size=299)


def _message(body: bytes | str, **headers: object) -> Message:
    return Message(
        body=body,
        content_type="application/json",
        content_encoding="utf-8",
        headers=dict(headers),
        accept={"application/json"},
    )


EVENT = {"type": "task-succeeded", "uuid": "a", "timestamp": 1.5, "result": "{'x': 'é'}"}


@pytest.mark.parametrize("body", [json.dumps(EVENT).encode(), json.dumps(EVENT)])
def test_plain_json_is_read_as_it_is(body: bytes | str) -> None:
    assert decode_body(_message(body)) == EVENT


def test_a_tagged_value_is_read_by_kombu() -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    body = kombu_dumps({**EVENT, "type": "task-result", "result": {"at": at}})
    assert '"__type__"' in body
    decoded = decode_body(_message(body.encode()))
    assert decoded["result"] == {"at": at}


def test_a_compressed_body_is_read_by_kombu() -> None:
    body = zlib.compress(json.dumps(EVENT).encode())
    assert decode_body(_message(body, compression="application/x-gzip")) == EVENT


@pytest.mark.parametrize(
    "value",
    [
        None,
        "x",
        3,
        True,
        {"status": "eventful"},
        {"status": "eventful", "count": 2, "ok": None},
        {"nested": {"a": 1}},
        {1: "not a str key"},
        {"s": {1, 2}},
        {1, 2},
        b"bytes",
        float("nan"),
        [1, "x"],
    ],
)
def test_jsonable_keeps_what_json_takes_and_reprs_the_rest(value: object) -> None:
    import json

    from swh_like_scheduler.listener.events import jsonable

    try:  # what the fast paths must agree with
        json.dumps(value, allow_nan=False)
        expected = value
    except (TypeError, ValueError):
        expected = repr(value)
    assert jsonable(value) == expected
