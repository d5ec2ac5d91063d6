"""``argsrepr``/``kwargsrepr`` headers, equal to Celery's, computed faster.

Celery fills these headers with :func:`celery.utils.saferepr.saferepr`, a
streaming, truncating ``repr`` that costs about half of the time of
building a message.  For the arguments a scheduler sends (tuples, lists and
dicts of strings, numbers, booleans and ``None``, shorter than the size
limit) its output is simple: numbers as ``str()``, strings between single
quotes with only ``'`` escaped, containers as Python writes them, dict keys
formatted the same way.  :func:`safe_repr` produces that directly and falls
back to ``saferepr`` itself for anything else (other types, nesting deeper
than ``maxlevels``, or a text that would reach the size limit, where
``saferepr`` starts cutting).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery.utils.saferepr import saferepr

_NUMBERS = (int, float, bool)


def safe_repr(value: Any, maxlen: int | None, maxlevels: int) -> str:
    """``saferepr(value, maxlen, maxlevels=maxlevels)``, computed faster."""
    if maxlen is None or maxlen > 0:
        parts: list[str] = []
        try:
            plain = _write(value, 0, maxlevels, parts.append)
        except (ValueError, RecursionError):  # e.g. int too large for str()
            plain = False
        if plain:
            text = "".join(parts)
            # below the limit saferepr never truncates a token
            if maxlen is None or len(text) < maxlen:
                return text
    return str(saferepr(value, maxlen, maxlevels=maxlevels))


def _write(value: Any, depth: int, maxlevels: int, out: Callable[[str], Any]) -> bool:
    """Append the tokens of ``value``; ``False`` if it is not a plain value."""
    kind = type(value)
    if kind is str:
        out("'" + value.replace("'", "\\'") + "'")
        return True
    if kind in _NUMBERS:
        out(str(value))
        return True
    if value is None:
        out("None")
        return True
    if kind is tuple or kind is list or kind is dict:
        if maxlevels and depth >= maxlevels:
            return False  # saferepr elides it as (...)
        if kind is dict:
            return _write_dict(value, depth, maxlevels, out)
        opening, closing = ("(", ")") if kind is tuple else ("[", "]")
        out(opening)
        for index, item in enumerate(value):
            if index:
                out(", ")
            if not _write(item, depth + 1, maxlevels, out):
                return False
        out(",)" if kind is tuple and len(value) == 1 else closing)
        return True
    return False


def _write_dict(
    value: dict[Any, Any], depth: int, maxlevels: int, out: Callable[[str], Any]
) -> bool:
    out("{")
    for index, (key, item) in enumerate(value.items()):
        if index:
            out(", ")
        kind = type(key)
        if kind is str:
            out("'" + key.replace("'", "\\'") + "'")
        elif kind in _NUMBERS:
            out(str(key))
        elif key is None:
            out("None")
        else:
            return False
        out(": ")
        if not _write(item, depth + 1, maxlevels, out):
            return False
    out("}")
    return True
