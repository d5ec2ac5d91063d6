"""The origin files' JSON lines read bounded (visits/lines.py): a line
longer than the limit is refused after the limit's bytes, not after the
whole line; the JSON numbers no writer stores are refused at their
boundaries; every error names its line."""

from __future__ import annotations

import io

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.visits.lines import json_lines


class Endless(io.RawIOBase):
    """A line that never ends: the bytes handed out are counted."""

    def __init__(self) -> None:
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        size = len(buffer)
        buffer[:size] = b"a" * size
        self.given += size
        return size


def test_a_line_without_end_is_refused_after_the_limit() -> None:
    source = Endless()
    stream = io.BufferedReader(source, buffer_size=4096)
    with pytest.raises(InvalidInput) as refused:
        next(json_lines(stream, limit=10_000))
    assert refused.value.line == 1 and "longer than 10,000 bytes" in refused.value.message
    assert source.given <= 10_000 + 2 * 4096  # the limit and a buffer's worth, never the line


def test_a_line_at_the_limit_is_read_and_one_byte_more_is_refused() -> None:
    line = b'{"a": "' + b"x" * 20 + b'"}'
    limit = len(line)
    assert list(json_lines(io.BytesIO(line + b"\n" + line), limit=limit)) == [
        (1, {"a": "x" * 20}),
        (2, {"a": "x" * 20}),
    ]
    with pytest.raises(InvalidInput) as refused:
        list(json_lines(io.BytesIO(line + b"\n" + line + b" \n"), limit=limit))
    assert refused.value.line == 2


def test_blank_lines_count_and_a_byte_order_mark_and_crlf_are_read() -> None:
    text = b'\xef\xbb\xbf{"a": 1}\r\n\n  \n{"b": 2}\r\n'
    assert list(json_lines(io.BytesIO(text))) == [(1, {"a": 1}), (4, {"b": 2})]


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        (b"9223372036854775807", 2**63 - 1),
        (b"-9223372036854775808", -(2**63)),
        (b"1.7976931348623157e308", 1.7976931348623157e308),
        (b"-0.0", -0.0),
    ],
)
def test_the_numbers_at_the_edges_are_kept(value: bytes, kept: object) -> None:
    assert list(json_lines(io.BytesIO(b'{"n": ' + value + b"}"))) == [(1, {"n": kept})]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (b"9223372036854775808", "outside signed 64 bits"),
        (b"-9223372036854775809", "outside signed 64 bits"),
        (b"1" * 5000, "5,000 digits"),
        (b"1.8e308", "reads as infinity"),
        (b"-1e999", "reads as infinity"),
        (b"NaN", "NaN is not a JSON number"),
        (b"Infinity", "Infinity is not a JSON number"),
        (b"[" * 100_000 + b"]" * 100_000, "too deeply"),
        (b'"\xed\xa0\x80"', "not UTF-8"),  # a surrogate written as UTF-8 bytes
        (b"'single'", "not valid JSON"),
    ],
)
def test_what_no_writer_stores_is_refused_naming_the_line(value: bytes, fragment: str) -> None:
    text = b'{"n": 1}\n\n{"n": ' + value + b"}\n"
    with pytest.raises(InvalidInput) as refused:
        list(json_lines(io.BytesIO(text)))
    assert refused.value.line == 3 and fragment in refused.value.message


def test_a_line_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidInput, match="must be a JSON object") as refused:
        list(json_lines(io.BytesIO(b"[1, 2]\n")))
    assert refused.value.line == 1
