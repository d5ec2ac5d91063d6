"""The store interface's values as JSON and back, for the remote store
(:mod:`.client`) and its server (``/rpc``).

A value keeps its type across the wire: instants, durations, times of day,
enums, tuples, mappings with non-text keys, the model's records (dataclasses,
rebuilt through their constructors, so what arrives is validated as if made
here) and the scheduler's exceptions. Only the classes registered here can
be decoded: a message names a class, it never imports one."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, time, timedelta
from enum import Enum
from typing import Any

from ..domain import enums, exceptions, fencing, model, run_model
from ..domain.exceptions import InvalidInput, SchedulerError
from ..intake import jobs

TYPE = "__type__"


def _registry(modules: Iterable[Any]) -> tuple[dict[str, type], dict[str, type[Enum]]]:
    records: dict[str, type] = {}
    enums: dict[str, type[Enum]] = {}
    for module in modules:
        for name, value in vars(module).items():
            if not isinstance(value, type) or value.__module__ != module.__name__:
                continue
            if issubclass(value, Enum):
                enums[name] = value
            elif dataclasses.is_dataclass(value):
                records[name] = value
    return records, enums


def _modules() -> list[Any]:
    from ..domain import records
    from ..policy import type_edit
    from ..visits import feedback, policy
    from ..visits import model as visits
    from . import values

    return [
        *(model, enums, run_model, values, jobs, records, fencing),
        *(visits, feedback, policy, type_edit),
    ]


_RECORDS: dict[str, type] = {}
_ENUMS: dict[str, type[Enum]] = {}
_ERRORS: dict[str, type[SchedulerError]] = {
    name: value
    for name, value in vars(exceptions).items()
    if isinstance(value, type) and issubclass(value, SchedulerError)
}


def _load() -> None:
    if not _RECORDS:
        records, enums = _registry(_modules())
        _ENUMS.update(enums)
        _RECORDS.update(records)


def encode(value: Any) -> Any:
    """``value`` as JSON values (see the module doc)."""
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no NaN nor infinities: sent as text, so the other side
        # refuses it as the local store would
        return {TYPE: "float", "value": repr(value)}
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Enum):
        return {TYPE: "enum", "class": type(value).__name__, "value": value.value}
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return {TYPE: "datetime", "value": value.isoformat()}
    if isinstance(value, timedelta):
        return {TYPE: "timedelta", "value": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, time):
        return {TYPE: "time", "value": value.isoformat()}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple | frozenset | set):
        kind = "tuple" if isinstance(value, tuple) else "set"
        return {TYPE: kind, "items": [encode(v) for v in value]}
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value) and TYPE not in value:
            return {k: encode(v) for k, v in value.items()}
        return {TYPE: "map", "items": [[encode(k), encode(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init
        }
        return {TYPE: "record", "class": type(value).__name__, "fields": fields}
    if isinstance(value, SchedulerError):
        return encode_error(value)
    raise TypeError(f"cannot send a {type(value).__name__} over the wire")


def decode(value: Any, *, where: str = "body") -> Any:
    """The value :func:`encode` made; :class:`InvalidInput` (naming ``where``)
    for anything else."""
    if isinstance(value, list):
        return [decode(v, where=where) for v in value]
    if not isinstance(value, dict):
        return value
    kind = value.get(TYPE)
    if kind is None:
        return {k: decode(v, where=where) for k, v in value.items()}
    try:
        return _decode_tagged(kind, value, where)
    except SchedulerError:
        raise
    except Exception as exc:  # whatever a constructor refuses: bad input
        raise InvalidInput(where, f"cannot read a {kind!r} value: {exc}") from None


def _decode_tagged(kind: Any, value: dict[str, Any], where: str) -> Any:
    _load()
    if kind == "datetime":
        instant = datetime.fromisoformat(value["value"])
        if instant.tzinfo is None:
            raise ValueError("an instant needs a UTC offset")
        return instant
    if kind == "timedelta":
        days, seconds, micro = value["value"]
        return timedelta(days=days, seconds=seconds, microseconds=micro)
    if kind == "time":
        return time.fromisoformat(value["value"])
    if kind == "float":
        text = value["value"]
        if text not in ("nan", "inf", "-inf"):
            raise ValueError(f"{text!r} is not a float sent as text")
        return float(text)
    if kind == "tuple":
        return tuple(decode(v, where=where) for v in value["items"])
    if kind == "set":
        return frozenset(decode(v, where=where) for v in value["items"])
    if kind == "map":
        return {decode(k, where=where): decode(v, where=where) for k, v in value["items"]}
    if kind == "enum":
        return _ENUMS[value["class"]](value["value"])
    if kind == "record":
        cls = _RECORDS[value["class"]]
        fields = value["fields"]
        if not isinstance(fields, dict):
            raise TypeError("fields must be an object")
        return cls(**{k: decode(v, where=where) for k, v in fields.items()})
    if kind == "error":
        return decode_error(value)
    raise ValueError(f"unknown type tag {kind!r}")


def encode_error(error: SchedulerError) -> dict[str, Any]:
    """A scheduler exception with its attributes (field, key, task id...)."""
    state = {k: encode(v) for k, v in vars(error).items() if not k.startswith("_")}
    return {TYPE: "error", "class": type(error).__name__, "args": [str(error)], "state": state}


def decode_error(value: Mapping[str, Any]) -> SchedulerError:
    """The exception :func:`encode_error` sent (a plain
    :class:`SchedulerError` for a class this side does not know)."""
    cls = _ERRORS.get(str(value.get("class")), SchedulerError)
    error = Exception.__new__(cls)
    state = value.get("state") or {}
    if isinstance(state, dict):
        error.__dict__.update({k: decode(v) for k, v in state.items()})
    error.args = tuple(value.get("args") or ())
    return error
