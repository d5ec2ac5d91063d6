"""The cost model of /rpc (issue 60): every argument that sizes the work of
a method a read-only token may call has a cap, found by walking the method
registry, so a new read cannot forget one; and the checks of the door
itself (caps, floors, 64-bit integers, finite numbers)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest

from swh_like_scheduler.api.routes_rpc import READ_METHODS, WRITE_METHODS
from swh_like_scheduler.api.rpc_caps import (
    FLOORS,
    READ_CAPS,
    bounded,
    sizing_arguments,
)
from swh_like_scheduler.api.rpc_types import check_call
from swh_like_scheduler.domain.enums import TaskStatus
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.interface import SchedulerStore
from swh_like_scheduler.store.values import TaskFilter

CENSUS_SCANS = (
    "sweep_conditions",
    "conditions_to_assess",
    "count_conditions",
    "condition_frontier",
)


@pytest.mark.parametrize("method", sorted(READ_METHODS))
def test_every_sizing_argument_of_a_read_has_a_cap(method: str) -> None:
    """Walks the registry: a read method taking a list, a map or an amount
    without a cap in READ_CAPS fails here."""
    for implementation in (SQLAlchemyStore, SchedulerStore):
        sizing = sizing_arguments(getattr(implementation, method))
        missing = [path for path in sizing if path not in READ_CAPS.get(method, {})]
        assert not missing, f"{method}: no cap for {missing} (add it to READ_CAPS)"


def test_every_cap_names_an_argument_of_its_method() -> None:
    for method, caps in READ_CAPS.items():
        assert method in READ_METHODS | WRITE_METHODS
        assert set(caps) <= set(sizing_arguments(getattr(SQLAlchemyStore, method))), method
    for method, path in FLOORS:
        assert path in READ_CAPS[method]


def test_the_census_scans_need_the_read_write_token() -> None:
    """Whole-ledger scans only the census refresh needs (it then writes)."""
    for method in CENSUS_SCANS:
        assert method not in READ_METHODS and method in WRITE_METHODS


def _probe(
    self: Any,
    ids: Sequence[int],
    *,
    after_id: int = 0,
    limit: int = 10,
    flag: bool = False,
    since: datetime | None = None,
    after: tuple[datetime, int] | None = None,
    criteria: TaskFilter | None = None,
    weights: Mapping[str, float] | None = None,
    name: str = "",
    **more: Any,
) -> None: ...


def test_what_sizes_a_methods_work_is_read_from_its_annotations() -> None:
    """Lists, maps, amounts and the lists of the records taken; not
    positions (after_id), flags, instants, records of a fixed shape, texts."""
    assert sizing_arguments(_probe) == ["ids", "limit", "criteria.status", "weights"]


def _call(method: str, **kwargs: Any) -> inspect.BoundArguments:
    return inspect.signature(getattr(SQLAlchemyStore, method)).bind(None, **kwargs)


@pytest.mark.parametrize(
    ("method", "kwargs", "field", "message"),
    [
        ("search_tasks", {"limit": 1_001}, "kwargs.limit", "is at most 1,000 per call"),
        ("search_tasks", {"limit": 0}, "kwargs.limit", "is at least 1, not 0"),
        ("get_task_runs", {"task_id": 1, "limit": -1}, "kwargs.limit", "is at least 1"),
        (
            "search_tasks",
            {"criteria": TaskFilter(status=[TaskStatus.WAITING] * (len(TaskStatus) + 1))},
            "kwargs.criteria.status",
            f"names at most {len(TaskStatus)} per call",
        ),
        ("problem_page", {"query": None, "offset": 100_001}, "kwargs.offset", "at most 100,000"),
        (
            "sweep_conditions",
            {"type_versions": {}, "after_id": 0, "span": 10**9},
            "kwargs.span",
            "is at most 50,000 per call",
        ),
        (
            "conditions_to_assess",
            {"now": None, "type_versions": {f"t{i}": "v" for i in range(5_001)}},
            "kwargs.type_versions",
            "names at most 5,000 per call",
        ),
        ("delete_old_runs", {"ended_before": None, "limit": -1}, "kwargs.limit", "at least 0"),
    ],
)
def test_the_door_refuses_past_a_cap_or_under_a_floor(
    method: str, kwargs: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        bounded(method, _call(method, **kwargs))
    assert refused.value.field == field
    assert message in refused.value.message


def test_the_door_takes_what_the_caps_allow() -> None:
    bounded("search_tasks", _call("search_tasks", limit=1_000))
    bounded("problem_page", _call("problem_page", query=None, limit=0))
    bounded("delete_old_runs", _call("delete_old_runs", ended_before=None, limit=0))
    bounded("get_task_runs", _call("get_task_runs", task_id=1))  # its default


@pytest.mark.parametrize(
    ("method", "kwargs", "field", "message"),
    [
        ("search_tasks", {"after_id": -(10**30)}, "after_id", "from -9,223,372,036,854,775,808"),
        ("search_tasks", {"after_id": 2**63}, "after_id", "(64 bits)"),
        ("get_tasks", {"ids": [1, 2**64]}, "ids[1]", "(64 bits)"),
        (
            "record_host_clock",
            {"holder": "h", "role": "r", "offset_seconds": float("nan")},
            "offset_seconds",
            "a finite number",
        ),
        (
            "record_host_clock",
            {"holder": "h", "role": "r", "offset_seconds": float("inf")},
            "offset_seconds",
            "NaN and infinities are not JSON numbers",
        ),
    ],
)
def test_numbers_no_column_holds_are_refused_at_the_type_check(
    method: str, kwargs: dict[str, Any], field: str, message: str
) -> None:
    target = getattr(SQLAlchemyStore, method)
    with pytest.raises(InvalidInput) as refused:
        check_call(target, _call(method, **kwargs))
    assert refused.value.field == field
    assert message in refused.value.message


def test_the_largest_64_bit_integers_pass_the_type_check() -> None:
    target = SQLAlchemyStore.search_tasks
    for after_id in (2**63 - 1, -(2**63)):
        check_call(target, _call("search_tasks", after_id=after_id))
