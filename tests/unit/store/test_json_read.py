"""The store's JSON reader gives what ``json.loads`` gives, for every text
(store/json_read.py): orjson where it agrees, the standard library where it
would not."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swh_like_scheduler.store.json_read import json_loads

# every JSON value, with integers far past 64 bits and every float
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**70)
    | st.integers(min_value=-(2**70), max_value=-(2**62))
    | st.floats()
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)


def _same(text: str | bytes) -> None:
    # repr tells 1 from 1.0, -0.0 from 0.0 and shows NaN; keys in order
    assert repr(json_loads(text)) == repr(json.loads(text))


@given(_values, st.booleans())
def test_any_value_reads_back_as_the_standard_library_reads_it(value: object, ascii: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii)
    _same(text)
    _same(text.encode("utf-8", "surrogatepass") if not ascii else text.encode())


@pytest.mark.parametrize(
    "text",
    [
        "18446744073709551616",  # 2**64: orjson alone would give a float
        "-9223372036854775809",
        "123456789012345678901234567890",
        '{"n": 9223372036854775807, "m": 18446744073709551615}',
        "0.1234567890123456789012",
        '"a string with 12345678901234567890 inside"',
        "NaN",
        "[Infinity, -Infinity]",
        "1e400",
        '"\\ud800"',  # a lone surrogate
        '{"a": 1, "a": 2}',  # the last one wins
        " [1, 2.0, -0.0, true, null] ",
        '"caf\\u00e9"',
    ],
)
def test_the_texts_orjson_reads_otherwise_are_read_as_the_standard_library_reads_them(
    text: str,
) -> None:
    _same(text)
    _same(text.encode())
    big = json_loads(text)
    if text == "18446744073709551616":
        assert big == 2**64 and type(big) is int


@pytest.mark.parametrize("text", ["", "{", "[1,]", "nul", '{"a" 1}', "1 2"])
def test_invalid_json_raises_the_standard_librarys_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        json_loads(text)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    assert str(caught.value) == str(expected.value)
