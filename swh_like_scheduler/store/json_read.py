"""JSON columns read back with orjson, exactly as the standard library reads them.

Every run read back carries two JSON values (its result and history) and
every task three (its arguments, blackout windows and nodes); the listener
reads a run twice and its task once per outcome. The standard library's
decoder (through psycopg's loader: encoding detection, then a decoder
object) took about 2.9 µs per value, some 7 % of the listener's CPU per
event; orjson reads the same values in about 1.0 µs.

orjson differs from the standard library on a few texts, which
:func:`json_loads` hands to the standard library instead:

- an integer of 19 digits or more (orjson reads one past 64 bits as a
  ``float``, silently losing digits: ``18446744073709551616`` would come back
  as ``1.8446744073709552e+19``); any run of 19 digits, even inside a string
  or a float's decimals, takes the slow road, which is always right;
- a text orjson refuses (``NaN``, ``1e400``, a lone surrogate ``"\\ud800"``,
  invalid JSON): the standard library reads what it can and raises its own
  ``json.JSONDecodeError`` for the rest.

The result is the value ``json.loads`` gives, for every input
(``tests/unit/store/test_json_read.py`` holds the two to it).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_LONG_DIGITS_TEXT = re.compile(r"[0-9]{19}")
_LONG_DIGITS_BYTES = re.compile(rb"[0-9]{19}")


def json_loads(data: str | bytes | bytearray) -> Any:
    """``json.loads(data)``, read by orjson where it gives the same value."""
    pattern = _LONG_DIGITS_TEXT if isinstance(data, str) else _LONG_DIGITS_BYTES
    if pattern.search(data) is None:  # type: ignore[arg-type]
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


__all__ = ["json_loads"]
