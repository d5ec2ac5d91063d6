"""The reference's lister reads and queue positions served under ``/swh/``
(:mod:`.swh_methods` registers them): each a store method of the same name
(issue 59), its arguments read from the reference's forms.

- ``listers/get``, ``listers/get_by_id``, ``lister/get``: listers as the
  reference's ``Lister`` (their ids as UUIDs), ``listers/get`` in the order
  they were created;
- ``lister/visit_types``: the visit types of a lister's origins, the
  lister given as the reference's ``Lister`` (only its id is read);
- ``visit_scheduler/get`` and ``/set``: a queue position is a number of
  seconds there and an instant here (:func:`.swh_models.position_seconds`),
  so a position the client sets is read back as it gave it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..domain.exceptions import InvalidInput
from ..visits.model import visit_type_name
from . import swh_models as m
from .rpc_caps import READ_CAPS
from .state import ApiState

_NEVER = datetime.min.replace(tzinfo=UTC)
#: most ids in one ``listers/get_by_id`` (as over ``/rpc``)
MAX_LISTER_IDS = READ_CAPS["get_listers_by_id"]["lister_ids"]


def _flag(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(where, f"{value!r} is not true or false")
    return value


def _name(where: str, value: Any, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(where, f"{value!r} is not a text")
    return value


def get_listers(state: ApiState, with_first_visits_to_schedule: Any) -> list[Any]:
    wanted = _flag("with_first_visits_to_schedule", with_first_visits_to_schedule)
    found = state.store.get_listers(with_first_visits_to_schedule=wanted)
    # in the order they were created, as the reference's table hands them out
    # (its own tests compare in that order); ours are by name otherwise
    return [m.lister_out(x) for x in sorted(found, key=lambda x: (x.created or _NEVER, x.id))]


def get_listers_by_id(state: ApiState, lister_ids: Any) -> list[Any]:
    if isinstance(lister_ids, str | bytes | dict) or not isinstance(lister_ids, list | tuple):
        raise InvalidInput("lister_ids", f"{type(lister_ids).__name__} is not a list")
    if len(lister_ids) > MAX_LISTER_IDS:
        raise InvalidInput("lister_ids", f"names at most {MAX_LISTER_IDS:,} per call")
    ids = [m.lister_id_of(f"lister_ids[{n}]", v) for n, v in enumerate(lister_ids)]
    return [m.lister_out(x) for x in state.store.get_listers_by_id(ids)]


def get_lister(state: ApiState, name: Any, instance_name: Any) -> Any:
    found = state.store.get_lister(
        _name("name", name) or "", _name("instance_name", instance_name, optional=True)
    )
    return None if found is None else m.lister_out(found)


def get_visit_types_for_listed_origins(state: ApiState, lister: Any) -> list[str]:
    given = m.model("lister", lister, "Lister").get("id")
    if given is None:
        raise InvalidInput("lister.id", "the lister's id is needed (get_or_create_lister)")
    return state.store.get_visit_types_for_listed_origins(m.lister_id_of("lister.id", given))


def visit_scheduler_queue_position_get(state: ApiState) -> dict[str, int | None]:
    positions = state.store.visit_scheduler_queue_position_get()
    return {kind: m.position_seconds(at) for kind, at in positions.items()}


def visit_scheduler_queue_position_set(state: ApiState, visit_type: Any, position: Any) -> None:
    at = m.position_instant("position", position)
    if at is None:
        raise InvalidInput("position", "a queue position is a number of seconds, not null")
    state.store.visit_scheduler_queue_position_set(visit_type_name("visit_type", visit_type), at)
