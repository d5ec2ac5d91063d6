"""The arguments of an ``/rpc`` call checked against the store method's
annotations before the call: a text where ids go is the caller's mistake
(422 naming the argument), not a database failure (503).

The check follows what the annotations say of plain values (numbers, texts,
flags, instants, durations, the model's records and enums, sequences and
mappings of them, unions, ``None``); a callable or ``Any`` takes anything.
A text stands for one of the values of a text enum (the wire may carry
``"failed"`` for ``RunStatus.FAILED``). A whole number is one a database
column holds (a signed 64-bit integer: ``after_id`` -10**30 was a 503 on
PostgreSQL, "bigint out of range", and a 500 on SQLite); a number with a
fraction is finite (JSON has no NaN nor infinity; Python's parser reads
``NaN`` and ``1e999`` as such).
"""

from __future__ import annotations

import collections.abc as abc
import inspect
import math
import reprlib
import types
import typing
from enum import Enum, StrEnum
from functools import cache
from typing import Any

from ..domain.exceptions import InvalidInput

#: annotations that take anything
_ANYTHING = (Any, abc.Callable)
#: how a refused value is shown: three levels, sixty characters of text
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 60, 60
#: the whole numbers a database column holds (PostgreSQL's bigint, SQLite's INTEGER)
INT64 = range(-(2**63), 2**63)


@cache
def hints(function: Any) -> dict[str, Any]:
    """``function``'s parameter annotations, resolved (none when they cannot be)."""
    try:
        found = typing.get_type_hints(function)
    except Exception:  # an annotation only a type checker can read: no check
        return {}
    found.pop("return", None)
    return found


def check_call(function: Any, bound: inspect.BoundArguments) -> None:
    """Refuse (:class:`InvalidInput` naming the parameter, as the store
    does: ``ids``, ``origins[0]``) an argument whose value is not of its
    parameter's annotation."""
    # the function, not the bound method: the cache must not keep stores alive
    annotations = hints(getattr(function, "__func__", function))
    for name, value in bound.arguments.items():
        hint = annotations.get(name)
        if hint is None or fits(value, hint):
            continue
        field, value, hint = _first_misfit(name, value, hint)
        shown = _SHOWN.repr(value)  # bounded: never recurses deep
        if _out_of_range(value):
            raise InvalidInput(field, f"must be {_range(value)}, not {shown}")
        raise InvalidInput(field, f"must be {describe(hint)}, not {type(value).__name__} {shown}")


def _range(value: Any) -> str:
    if isinstance(value, int):
        return f"a whole number from {INT64.start:,} to {INT64.stop - 1:,} (64 bits)"
    return "a finite number (NaN and infinities are not JSON numbers)"


def _out_of_range(value: Any) -> bool:
    """A number of no column: a whole one past 64 bits, NaN, an infinity."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value not in INT64
    return isinstance(value, float) and not math.isfinite(value)


def _first_misfit(name: str, value: Any, hint: Any) -> tuple[str, Any, Any]:
    """The element of a sequence that does not fit, when that is the matter."""
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in arguments if a is not type(None)]
        if len(options) == 1 and value is not None:
            return _first_misfit(name, value, options[0])
    sequences = (abc.Sequence, abc.Collection, abc.Iterable, list)
    if origin in sequences and arguments and isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if not fits(item, arguments[0]):
                return f"{name}[{index}]", item, arguments[0]
    return name, value, hint


def fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the annotation ``hint`` (module doc)."""
    if hint in _ANYTHING or hint is typing.Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, option) for option in typing.get_args(hint))
    if origin is abc.Callable or hint is abc.Callable:
        return True
    if origin is None:
        return _plain(value, hint)
    arguments = typing.get_args(hint)
    if origin in (abc.Mapping, dict):
        if not isinstance(value, abc.Mapping):
            return False
        key, item = arguments or (Any, Any)
        return all(fits(k, key) and fits(v, item) for k, v in value.items())
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return False
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            return all(fits(v, arguments[0]) for v in value)
        return len(value) == len(arguments) and all(
            fits(v, a) for v, a in zip(value, arguments, strict=True)
        )
    if origin in (abc.Sequence, abc.Collection, abc.Iterable, list, set, frozenset):
        if isinstance(value, str | bytes | abc.Mapping) or not isinstance(value, abc.Iterable):
            return False
        if not isinstance(value, abc.Sized):
            return True  # an iterator: taken as it comes
        item = arguments[0] if arguments else Any
        return all(fits(v, item) for v in value)
    return isinstance(value, origin) if isinstance(origin, type) else True


def _plain(value: Any, hint: Any) -> bool:
    if not isinstance(hint, type):
        return True
    if hint is float:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and not _out_of_range(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool) and value in INT64
    if issubclass(hint, StrEnum) and isinstance(value, str):
        return value in {member.value for member in hint}
    if issubclass(hint, Enum):
        return isinstance(value, hint)
    return isinstance(value, hint)


def describe(hint: Any) -> str:
    """``hint`` in words short enough for a message."""
    if hint is type(None) or hint is None:
        return "none"
    if isinstance(hint, type):
        return hint.__name__
    text = str(hint)
    for prefix in ("collections.abc.", "typing.", "datetime.", "swh_like_scheduler."):
        text = text.replace(prefix, "")
    return text
