"""The cost model of ``/rpc``: what bounds the work of each call.

Every argument of a store read that sizes its work — a number of rows, a
span of ids, a list of ids or names, a map — has a cap here, the largest
value (or length) one call may ask, and numbers a floor (a limit of 0 or
less is a mistake, and SQLite reads ``LIMIT -1`` as "no limit"). A read
token (or none, under ``--open-reads``) then buys no more work over
``/rpc`` than over REST in one request: a page of whole rows (tasks, runs,
origins) holds at most ``MAX_PAGE`` of them, as ``GET /tasks``; a scan, or a
list of ids or of index entries, at most ``MAX_SCAN``, as ``POST
/tasks/bulk/...``; a list of names (types, nodes) or of an enumeration's
values as many as there are.

Which arguments size a method's work is read from its annotations
(:func:`sizing_arguments`): every collection, every number that is not a
position (:data:`POSITIONS`: an id to start after, a task's id), and those
of the records it takes (``criteria.status``). A test walks every read
method and finds a cap for each, so a new read cannot forget one.

The census step's scans (``sweep_conditions``, ``conditions_to_assess``,
``count_conditions``, ``condition_frontier``) serve the process that
refreshes the census, which writes what they find: they need the
read-write token (:mod:`.routes_rpc`), and keep their caps, which hold the
parameter lists of their statements far below what a database takes.
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import inspect
import types
import typing
from typing import Any

from ..domain.enums import Priority, RunStatus, TaskStatus
from ..domain.exceptions import InvalidInput
from ..health.census import SWEEP
from ..store.values import BULK_MAX_IDS, CONDITION_LEVELS, MAX_TYPE_VERSIONS
from .routes_bulk import MAX_ARGUMENTS, MAX_SCAN
from .routes_tasks import MAX_PAGE
from .rpc_types import hints

#: names of task types in one call (on SQLite each type ``held`` is a term
#: of one expression, whose depth SQLite holds to 1,000)
MAX_NAMES = 500
#: names of worker nodes in one call
MAX_NODES = 1000
#: how deep a page of problems may start (offset, and a total given)
MAX_PROBLEM_OFFSET = 100_000

#: per method, each sizing argument (``criteria.status``: a field of the
#: argument ``criteria``) and its largest value, or length
READ_CAPS: dict[str, dict[str, int]] = {
    "search_tasks": {"limit": MAX_PAGE, "criteria.status": len(TaskStatus)},
    "count_tasks": {"criteria.status": len(TaskStatus)},
    "list_pending": {"limit": MAX_PAGE, "priorities": len(Priority)},
    "get_task_runs": {"limit": MAX_PAGE, "statuses": len(RunStatus)},
    "get_listed_origins": {"limit": MAX_PAGE, "urls": MAX_PAGE},
    "get_tasks": {"ids": MAX_PAGE},
    "origin_visit_stats_get": {"ids": MAX_PAGE},
    "get_listers_by_id": {"lister_ids": MAX_PAGE},
    "preview_bulk": {
        "scan": MAX_SCAN,
        "criteria.status": len(TaskStatus),
        "criteria.condition": len(CONDITION_LEVELS),
        "criteria.arguments": MAX_ARGUMENTS,
        "criteria.ids": BULK_MAX_IDS,
    },
    "waiting_entries": {"limit": MAX_SCAN},
    "ready_task_ids": {"limit": MAX_SCAN, "priorities": len(Priority), "nodes": MAX_NODES},
    "ready_left_behind": {"priorities": len(Priority), "nodes": MAX_NODES},
    "next_ready_time": {"priorities": len(Priority)},
    "unstarted_run_counts": {"task_types": MAX_NAMES, "held": MAX_NAMES},
    "schedule_health": {"queued_upto": MAX_SCAN},
    "problem_page": {
        "limit": MAX_SCAN,
        "offset": MAX_PROBLEM_OFFSET,
        "known_total": MAX_PROBLEM_OFFSET,
    },
    "peek_next_visits": {"count": MAX_SCAN},
    # a forecast's body is some kilobytes per type: a few at a time
    "recorded_forecasts": {"limit": 24},
    # the census step's (read-write token)
    "conditions_to_assess": {
        "limit": MAX_SCAN,
        "type_versions": MAX_TYPE_VERSIONS,
        "retyped": MAX_TYPE_VERSIONS,
    },
    "sweep_conditions": {"span": SWEEP, "type_versions": MAX_TYPE_VERSIONS},
}
#: the numbers whose least value is not 1: a page of problems of 0 rows
#: gives the total alone, the others count from 0, and a runner's pass with
#: no room asks for 0 ready tasks (the store's contract answers ``[]``)
FLOORS: dict[tuple[str, str], int] = {
    ("problem_page", "limit"): 0,
    ("ready_task_ids", "limit"): 0,
    ("problem_page", "offset"): 0,
    ("problem_page", "known_total"): 0,
    ("schedule_health", "queued_upto"): 0,
    ("peek_next_visits", "count"): 0,
}
#: numbers that name a place, not an amount of work
POSITIONS = frozenset({"after_id", "task_id"})
#: numbers a method of any kind (a write's too) never takes below 0
COUNTS = frozenset({"limit", "count", "scan", "span"})
#: how a caller goes on past a cap, where it can
_PAGING = {
    "search_tasks": " (page with after_id)",
    "waiting_entries": " (page with after)",
    "preview_bulk": " (go on with after_id = next_after_id)",
}
_COLLECTIONS = (
    abc.Sequence,
    abc.Collection,
    abc.Iterable,
    abc.Mapping,
    list,
    tuple,
    set,
    frozenset,
    dict,
)


def bounded(method: str, bound: inspect.BoundArguments) -> None:
    """``method``'s arguments within :data:`READ_CAPS` and their floors
    (:class:`InvalidInput` naming ``kwargs.NAME``); the method's own
    default counts when the caller gave none. A method without caps (a
    write) is still refused a negative count (:data:`COUNTS`)."""
    bound.apply_defaults()
    caps = READ_CAPS.get(method, {})
    for path, cap in caps.items():
        value = _value_at(bound.arguments, path)
        if value is None:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            least = FLOORS.get((method, path), 1)
            if value > cap:
                raise InvalidInput(
                    f"kwargs.{path}", f"is at most {cap:,} per call{_PAGING.get(method, '')}"
                )
            if value < least:
                raise InvalidInput(f"kwargs.{path}", f"is at least {least}, not {value}")
        elif not isinstance(value, abc.Sized) or len(value) > cap:
            raise InvalidInput(f"kwargs.{path}", f"names at most {cap:,} per call")
    for name in COUNTS - set(caps):
        value = bound.arguments.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise InvalidInput(f"kwargs.{name}", f"is at least 0, not {value}")


def _value_at(arguments: dict[str, Any], path: str) -> Any:
    """The value at ``path`` (``criteria.status``), ``None`` when absent."""
    first, *rest = path.split(".")
    value = arguments.get(first)
    for name in rest:
        value = getattr(value, name, None)
    return value


def sizing_arguments(function: Any) -> list[str]:
    """The arguments of ``function`` (a store method) that size its work,
    by its annotations: collections, numbers but :data:`POSITIONS`, and the
    fields of the kind of the records it takes (``criteria.status``)."""
    annotations = hints(getattr(function, "__func__", function))
    found: list[str] = []
    for name, parameter in inspect.signature(function).parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
            continue
        found.extend(_sizing(name, annotations.get(name, Any)))
    return list(dict.fromkeys(found))


def _sizing(path: str, hint: Any) -> list[str]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return [p for option in options for p in _sizing(path, option)]
    origin = typing.get_origin(hint) or hint
    if hint in (int, float):
        return [] if path.rsplit(".", 1)[-1] in POSITIONS else [path]
    if origin is tuple and typing.get_args(hint)[-1:] != (Ellipsis,) and typing.get_args(hint):
        return []  # a record of a fixed shape: (deadline, id)
    if origin in _COLLECTIONS:
        return [path]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields = typing.get_type_hints(hint)
        return [
            p
            for field in dataclasses.fields(hint)
            for p in _sizing(f"{path}.{field.name}", fields[field.name])
        ]
    return []
