"""The JSON lines of the origin files (``swh scheduler origin record``,
``record-visit-status``), read bounded and refused by line number.

Each line is read with a length limit (:data:`MAX_LINE_BYTES`: a line
longer is refused when that many bytes are read, not after the whole of
it), decoded as UTF-8 and parsed as one JSON object. What the JSON reader
would take but no writer stores is refused while parsing: ``NaN`` and
``Infinity``, a number too large for a float (``1e999`` reads as
infinity), an integer outside signed 64 bits (a 5,000-digit one is
refused before Python is asked to read it). Invalid UTF-8, nesting too
deep for the reader, bad JSON: each an :class:`InvalidInput` naming the
line, never a traceback.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import IO, Any

from ..domain.exceptions import InvalidInput
from ..domain.validation import JSON_INT_MAX, JSON_INT_MIN

#: the longest line read (an origin's line is under a kilobyte; its url at
#: most 4,096 characters)
MAX_LINE_BYTES = 1 << 20
#: the most digits of an integer in signed 64 bits (9,223,372,036,854,775,807)
_INT_DIGITS = len(str(JSON_INT_MAX))


class _NotJson(Exception):
    """A value the JSON reader takes but no writer stores (raised in its hooks)."""


def _integer(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > _INT_DIGITS:
        raise _NotJson(f"an integer of {digits:,} digits is outside signed 64 bits")
    value = int(text)
    if not JSON_INT_MIN <= value <= JSON_INT_MAX:
        raise _NotJson(f"the integer {text} is outside signed 64 bits")
    return value


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise _NotJson(f"{shown} is too large for a JSON number (it reads as infinity)")
    return value


def _constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number (give a number, or a text in quotes)")


def parse_line(text: str, number: int) -> dict[str, Any]:
    """The JSON object of line ``number`` (its text without its end)."""
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_float, parse_constant=_constant)
    except _NotJson as refused:
        raise InvalidInput("json", str(refused), line=number) from None
    except json.JSONDecodeError as exc:
        where = f"at column {exc.pos + 1}" if exc.pos < len(text) else "at the end of the line"
        raise InvalidInput("json", f"not valid JSON ({exc.msg} {where})", line=number) from None
    except RecursionError:
        raise InvalidInput(
            "json", "nests lists and objects too deeply to be read", line=number
        ) from None
    if not isinstance(value, dict):
        raise InvalidInput("json", "each line must be a JSON object", line=number)
    return value


def _text(raw: bytes, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            "encoding",
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})",
            line=number,
        ) from None


def json_lines(
    stream: IO[bytes], *, limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each line of ``stream`` that is not
    blank; :class:`InvalidInput` naming the line for the first that is
    longer than ``limit`` bytes, not UTF-8, not JSON or not an object."""
    number = 0
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise InvalidInput(
                "json",
                f"the line is longer than {limit:,} bytes (an origin's line takes under a "
                "kilobyte)",
                line=number,
            )
        text = _text(raw, number).rstrip("\r\n")
        if number == 1:
            text = text.removeprefix("\ufeff")
        if not text.strip():
            continue
        yield number, parse_line(text, number)
