"""Listed origins and visit statuses read from JSON (the command line's
files, one object per line), each refusal naming the field.

A listed origin: ``{"lister_name", "lister_instance_name", "url",
"visit_type", "last_update" (ISO 8601 with a zone, or null),
"extra_loader_arguments", "enabled", "is_fork"}`` (``forked_from_url`` too).
A visit status, as the archive's journal publishes it: ``{"origin",
"visit_type", "date", "status", "snapshot"}`` (the snapshot a hex id or
null; ``type`` is read as ``visit_type``, the journal's own name)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from difflib import get_close_matches
from typing import Any

from ..domain.exceptions import InvalidInput
from .feedback import VisitStatusMessage
from .model import ListedOrigin, Lister, aware

ORIGIN_FIELDS = (
    "lister_name",
    "lister_instance_name",
    "url",
    "visit_type",
    "last_update",
    "extra_loader_arguments",
    "enabled",
    "is_fork",
    "forked_from_url",
)
STATUS_FIELDS = ("origin", "visit_type", "type", "visit", "date", "status", "snapshot", "metadata")


def instant(where: str, value: Any, *, required: bool = False) -> datetime | None:
    """An ISO 8601 date-time with its zone (``Z`` or an offset); ``None`` for null."""
    if value is None:
        if required:
            raise InvalidInput(where, "is required (an ISO 8601 date-time with a zone)")
        return None
    if not isinstance(value, str):
        raise InvalidInput(where, f"{value!r} is not an ISO 8601 date-time")
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            where, f"{value!r} is not an ISO 8601 date-time (example: 2026-01-31T14:00:00Z)"
        ) from None
    return aware(where, parsed)


def _unknown(raw: Mapping[str, Any], known: tuple[str, ...]) -> None:
    extra = sorted(set(raw) - set(known))
    if extra:
        raise InvalidInput(extra[0], f"is not a field (known: {', '.join(known)})")


def lister_of(raw: Mapping[str, Any]) -> tuple[str, str]:
    """The lister ``(name, instance)`` a listed origin's line names."""
    name = raw.get("lister_name")
    instance = raw.get("lister_instance_name") or ""
    if not isinstance(name, str) or not name:
        raise InvalidInput("lister_name", "is required (the lister's name, like gitlab)")
    if not isinstance(instance, str):
        raise InvalidInput("lister_instance_name", f"{instance!r} is not a name")
    Lister(name=name, instance_name=instance)  # the names' own checks
    return name, instance


#: up to this many registered listers are named when one is unknown
LISTED_KNOWN = 10


def _lister_name(name: str, instance: str) -> str:
    return f"{name!r} (instance {instance!r})" if instance else repr(name)


def unknown_lister(
    wanted: Mapping[tuple[str, str], int], known: Sequence[Lister]
) -> tuple[int, str, str, str] | None:
    """The first lister ``(name, instance)`` of ``wanted`` (each mapped to
    the line that first names it) that is none of the ``known`` listers (a
    mistyped name would make a new lister), as ``(line, name, instance,
    what to say)``: it named, how many others are unknown, a close match,
    and the registered listers when they are few. ``None``: all known."""
    registered = {(x.name, x.instance_name or "") for x in known}
    missing = sorted((line, names) for names, line in wanted.items() if names not in registered)
    if not missing:
        return None
    line, (name, instance) = missing[0]
    message = f"unknown lister {_lister_name(name, instance)}"
    if len(missing) > 1:
        message += f" (and {len(missing) - 1} more unknown)"
    message += "."
    everyone = sorted(registered)
    close = get_close_matches(name, sorted({n for n, _ in everyone}), n=1)
    near = [(n, i) for n, i in everyone if close and n == close[0]]
    if near:
        message += f" Did you mean {' or '.join(_lister_name(*x) for x in near)}?"
    if not everyone:
        message += " No lister is registered yet."
    elif len(everyone) <= LISTED_KNOWN and near != everyone:
        message += f" Registered: {', '.join(_lister_name(*x) for x in everyone)}."
    elif len(everyone) > LISTED_KNOWN:
        message += f" {len(everyone)} listers are registered."
    return line, name, instance, message


def origin_from_input(raw: Mapping[str, Any], lister_id: str) -> ListedOrigin:
    """The listed origin a line describes, for the lister ``lister_id``."""
    _unknown(raw, ORIGIN_FIELDS)
    for name in ("url", "visit_type"):
        if raw.get(name) is None:
            raise InvalidInput(name, "is required")
    return ListedOrigin(
        lister_id=lister_id,
        url=raw["url"],
        visit_type=raw["visit_type"],
        extra_loader_arguments=raw.get("extra_loader_arguments") or {},
        last_update=instant("last_update", raw.get("last_update")),
        enabled=raw.get("enabled", True),
        is_fork=raw.get("is_fork"),
        forked_from_url=raw.get("forked_from_url"),
    )


def status_from_input(raw: Mapping[str, Any]) -> VisitStatusMessage:
    """The visit status a journal message (or a line) holds."""
    _unknown(raw, STATUS_FIELDS)
    visit_type = raw.get("visit_type", raw.get("type"))
    for name, value in (("origin", raw.get("origin")), ("visit_type", visit_type)):
        if value is None:
            raise InvalidInput(name, "is required")
    return VisitStatusMessage(
        origin=raw["origin"],
        visit_type=visit_type,
        date=instant("date", raw.get("date"), required=True),  # type: ignore[arg-type]
        status=raw.get("status"),  # type: ignore[arg-type]
        snapshot=raw.get("snapshot"),
    )
