"""The wire format of swh-scheduler's own RPC client (swh-core's RPC
conventions), read and written without the reference's packages.

A call is a ``POST`` whose body is one msgpack map, the method's arguments
by name; the answer is the method's result in msgpack, or, for an error, a
map ``{"type", "module", "args", "message"}`` that the client turns back
into the exception of that name (``StaleData``, ``SchedulerException``).

The extended values:

- a date-time is a msgpack timestamp (extension -1), always with a zone;
  the older form ``{swhtype: "datetime", d: ISO 8601}`` is read too;
- an integer past 64 bits is extension 1 (positive) or 2 (negative), its
  magnitude in big-endian bytes;
- every other value the reference adds is a map of exactly two keys,
  ``swhtype`` (its kind) and ``d`` (its data), the keys as msgpack *bin*:
  ``uuid`` (the text form), ``timedelta`` (``days``, ``seconds``,
  ``microseconds``), ``paged_result`` (``results``, ``next_page_token``,
  ``total_results``), ``scheduler_model`` (a model object's fields and its
  class name under ``__type__``), ``last_visit_status`` (the enum's value).

:func:`loads` gives :class:`Model`, :class:`Enumerated` and
:class:`Paged` for the reference's objects, :class:`~uuid.UUID`,
:class:`~datetime.timedelta` and aware :class:`~datetime.datetime`
values; :func:`dumps` writes them back. msgpack is an optional dependency
(the ``swh-rpc`` extra): :data:`AVAILABLE` says whether it is installed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from ..domain.exceptions import InvalidInput
from ..domain.validation import parse_datetime, too_deep

try:
    msgpack: Any = importlib.import_module("msgpack")
except ImportError:  # pragma: no cover - the extra is in the test environment
    msgpack = None

#: whether msgpack (the ``swh-rpc`` extra) is installed
AVAILABLE = msgpack is not None
#: the extension codes of integers past 64 bits
LONG_INT, LONG_NEG_INT = 1, 2
#: the largest integer written or read (a key of 8 KiB of digits would be
#: work to convert for nothing any method takes)
MAX_INT_BYTES = 64
#: the deepest nesting of maps and lists a call may have (msgpack itself
#: refuses past 1,024, before any of this code runs)
MAX_DEPTH = 128
#: the module of the reference's exceptions, which its client re-raises
EXCEPTIONS_MODULE = "swh.scheduler.exc"
_TAG, _DATA = b"swhtype", b"d"


@dataclass(frozen=True)
class Model:
    """One of the reference's model objects (``Lister``, ``ListedOrigin``,
    ``Task``...): its class name and its fields, values as decoded."""

    type: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Enumerated:
    """A value of one of the reference's enums (``last_visit_status``)."""

    kind: str
    value: str


@dataclass(frozen=True)
class Paged:
    """A page of results (swh-core's ``PagedResult``)."""

    results: list[Any]
    next_page_token: Any = None
    total_results: int | None = None


@dataclass(frozen=True)
class RemoteError:
    """An error as the reference's client re-raises it: ``type`` is the name
    of an exception of :data:`EXCEPTIONS_MODULE`, ``message`` its one argument."""

    type: str
    message: str

    def as_map(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "module": EXCEPTIONS_MODULE,
            "args": [self.message],
            "message": self.message,
        }


def _tagged(kind: str, data: Any) -> dict[bytes, Any]:
    return {_TAG: kind, _DATA: data}


def _long(value: int) -> Any:
    code, magnitude = (LONG_INT, value) if value > 0 else (LONG_NEG_INT, -value)
    size = (magnitude.bit_length() + 7) // 8
    if size > MAX_INT_BYTES:
        raise ValueError(f"an integer of {size} bytes is more than {MAX_INT_BYTES}")
    return msgpack.ExtType(code, magnitude.to_bytes(size, "big"))


def _encode_other(value: Any) -> Any:
    """What msgpack cannot write by itself, in the reference's forms."""
    if isinstance(value, bool):  # never reached: msgpack writes booleans
        return value
    if isinstance(value, int):
        return _long(value)
    if isinstance(value, Model):
        return _tagged("scheduler_model", {**value.fields, "__type__": value.type})
    if isinstance(value, Enumerated):
        return _tagged(value.kind, value.value)
    if isinstance(value, Paged):
        data = {
            "results": value.results,
            "next_page_token": value.next_page_token,
            "total_results": value.total_results,
        }
        return _tagged("paged_result", data)
    if isinstance(value, UUID):
        return _tagged("uuid", str(value))
    if isinstance(value, timedelta):
        days = {"days": value.days, "seconds": value.seconds, "microseconds": value.microseconds}
        return _tagged("timedelta", days)
    if isinstance(value, RemoteError):
        return value.as_map()
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} has no form in the reference's wire format")


def dumps(value: Any) -> bytes:
    """``value`` in the reference's msgpack form (date-times must have a zone)."""
    if not AVAILABLE:
        raise RuntimeError("msgpack is not installed (pip install 'swh-like-scheduler[swh-rpc]')")
    packed: bytes = msgpack.packb(
        value, use_bin_type=True, datetime=True, default=_encode_other, strict_types=False
    )
    return packed


def _ext(code: int, data: bytes) -> int:
    if code not in (LONG_INT, LONG_NEG_INT):
        raise ValueError(f"msgpack extension {code} is not one the reference writes")
    if len(data) > MAX_INT_BYTES:
        raise ValueError(f"an integer of {len(data)} bytes is more than {MAX_INT_BYTES}")
    magnitude = int.from_bytes(data, "big")
    return magnitude if code == LONG_INT else -magnitude


def _text(key: Any) -> Any:
    return key.decode("utf-8", "surrogateescape") if isinstance(key, bytes) else key


def _decode_tagged(kind: Any, data: Any) -> Any:
    if kind == "scheduler_model":
        if not isinstance(data, dict) or not isinstance(data.get("__type__"), str):
            raise ValueError("a scheduler_model without its __type__")
        fields = {str(_text(k)): v for k, v in data.items() if k != "__type__"}
        return Model(data["__type__"], fields)
    if kind == "last_visit_status":
        if not isinstance(data, str):
            raise ValueError(f"{data!r} is not a last_visit_status")
        return Enumerated(kind, data)
    if kind == "uuid":
        return UUID(str(data))
    if kind == "timedelta":
        if not isinstance(data, dict):
            raise ValueError(f"{data!r} is not a timedelta (days, seconds, microseconds)")
        unknown = set(data) - {"days", "seconds", "microseconds"}
        if unknown:
            raise ValueError(f"a timedelta has no {sorted(map(str, unknown))[0]}")
        return timedelta(**{str(k): _number(v) for k, v in data.items()})
    if kind == "datetime":  # the form before msgpack timestamps
        if not isinstance(data, str):
            raise ValueError(f"{data!r} is not an ISO 8601 date-time")
        return parse_datetime("datetime", data)
    if kind == "paged_result":
        if not isinstance(data, dict):
            raise ValueError("a paged_result is a map")
        return Paged(
            list(data.get("results") or []), data.get("next_page_token"), data.get("total_results")
        )
    raise ValueError(f"swhtype {kind!r} is not one this server reads")


def _number(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not a whole number")
    return value


def _object_hook(value: dict[Any, Any]) -> Any:
    if len(value) == 2 and _TAG in value and _DATA in value:
        return _decode_tagged(value[_TAG], value[_DATA])
    return value


def loads(data: bytes) -> Any:
    """The value of a call's body; :class:`InvalidInput` (``body``) for
    anything the reference's client would not have sent: not msgpack, an
    unknown extension or ``swhtype``, a date out of range, an integer past
    :data:`MAX_INT_BYTES`, nesting deeper than :data:`MAX_DEPTH`."""
    if not AVAILABLE:
        raise RuntimeError("msgpack is not installed (pip install 'swh-like-scheduler[swh-rpc]')")
    try:
        value = msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=False,
            timestamp=3,
            ext_hook=_ext,
            object_hook=_object_hook,
        )
    except InvalidInput as error:
        raise InvalidInput("body", f"{error.field}: {error.message}") from None
    except (ValueError, TypeError, OverflowError, msgpack.ExtraData) as error:
        # msgpack's own errors (FormatError, StackError) are ValueErrors
        reason = str(error) or type(error).__name__
        raise InvalidInput("body", f"is not the reference's msgpack: {reason}") from None
    if too_deep(value, MAX_DEPTH):
        raise InvalidInput("body", f"nests maps and lists more than {MAX_DEPTH} levels deep")
    return value


def aware(value: datetime) -> datetime:
    """A date-time msgpack can write (a naive one is taken as UTC)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
