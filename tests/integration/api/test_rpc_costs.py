"""What a read-only token can make ``/rpc`` do (issue 60), on a real server
over SQLite and PostgreSQL: every argument that sizes the work of a read
is capped, each cap met is served and each one passed is a 422 naming the
argument; the census step's whole-ledger scans need the read-write token,
and their maps of task types cannot outgrow a statement's parameters (a
439 kB map was 9 s of CPU, 150 MB, then a 503 "cannot reach the
database"; one sweep with a read-only token returned every id of 300k
tasks)."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest

from swh_like_scheduler.api.routes_rpc import READ_METHODS
from swh_like_scheduler.api.rpc_caps import FLOORS, READ_CAPS, sizing_arguments
from swh_like_scheduler.domain.enums import Priority, RunStatus, TaskStatus
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.health.census import SWEEP
from swh_like_scheduler.store import SQLAlchemyStore, wire
from swh_like_scheduler.store.values import (
    MAX_TYPE_VERSIONS,
    BulkAction,
    BulkFilter,
    ProblemQuery,
    TaskFilter,
)


def base_calls(now: datetime) -> dict[str, dict[str, Any]]:
    """A valid call of each read method with sizing arguments."""
    return {
        "search_tasks": {"criteria": TaskFilter()},
        "count_tasks": {"criteria": TaskFilter()},
        "list_pending": {"task_type": "sleep", "now": now},
        "get_task_runs": {"task_id": 1},
        "get_listed_origins": {},
        "get_tasks": {"ids": [1]},
        "origin_visit_stats_get": {"ids": [("https://e.org/a", "git")]},
        "get_listers_by_id": {"lister_ids": ["0" * 32]},
        "preview_bulk": {
            "action": BulkAction.DISABLE,
            "criteria": BulkFilter(type="sleep"),
            "now": now,
        },
        "waiting_entries": {"task_type": "sleep", "priority": Priority.NORMAL},
        "ready_task_ids": {"task_type": "sleep", "now": now, "limit": 10},
        "ready_left_behind": {"task_type": "sleep", "at": now},
        "next_ready_time": {"task_type": "sleep"},
        "unstarted_run_counts": {},
        "schedule_health": {"now": now, "counts": False},
        "problem_page": {"query": ProblemQuery()},
        "recorded_forecasts": {},
        "peek_next_visits": {
            "visit_type": "git",
            "count": 10,
            "policy": "oldest_scheduled_first",
            "now": now,
        },
    }


#: a value of ``n`` items for each sizing collection (by method and path, else path)
SAMPLES: dict[str, Callable[[int], Any]] = {
    "ids": lambda n: list(range(1, n + 1)),
    "origin_visit_stats_get:ids": lambda n: [(f"https://e.org/{i}", "git") for i in range(n)],
    "lister_ids": lambda n: [f"{i:032x}" for i in range(n)],
    "urls": lambda n: [f"https://e.org/{i}" for i in range(n)],
    "statuses": lambda n: [RunStatus.FAILED] * n,
    "priorities": lambda n: [Priority.NORMAL] * n,
    "nodes": lambda n: [f"node{i}" for i in range(n)],
    "task_types": lambda n: [f"type{i}" for i in range(n)],
    "held": lambda n: {f"type{i}": None for i in range(n)},
    "criteria.status": lambda n: (TaskStatus.WAITING,) * n,
    "criteria.condition": lambda n: ("ERROR",) * n,
    "criteria.arguments": lambda n: tuple((f"a{i}", i) for i in range(n)),
    "criteria.ids": lambda n: tuple(range(1, n + 1)),
}


def _with(call: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``call`` in the wire format with the argument at ``path`` set; a
    field of a record (``criteria.status``) set in the record's wire form,
    past the client's own checks, as any caller may send it."""
    encoded = wire.encode(call)
    first, *rest = path.split(".")
    if not rest:
        encoded[first] = wire.encode(value)
    else:
        encoded[first]["fields"][rest[0]] = wire.encode(value)
    return encoded


def _is_number(method: str, path: str) -> bool:
    """Whether the argument at ``path`` is annotated a number (else a collection)."""
    hint: Any = getattr(SQLAlchemyStore, method)
    for name in path.split("."):
        hint = typing.get_type_hints(hint)[name]
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(options) == 1:
            hint = options[0]
    return hint in (int, float)


def _sized(method: str, path: str, n: int) -> Any:
    if _is_number(method, path):
        return n
    sample = SAMPLES.get(f"{method}:{path}") or SAMPLES[path]
    return sample(n)


def _post(http: httpx.Client, method: str, kwargs: dict[str, Any]) -> httpx.Response:
    return _send(http, method, wire.encode(kwargs))


def _send(http: httpx.Client, method: str, encoded: dict[str, Any]) -> httpx.Response:
    return http.post(f"/rpc/{method}", json={"kwargs": encoded}, timeout=60)


def _cases() -> list[tuple[str, str]]:
    return [(m, p) for m in sorted(READ_METHODS) for p in READ_CAPS.get(m, {})]


@pytest.mark.parametrize(("method", "path"), _cases())
def test_each_sizing_argument_of_a_read_is_served_to_its_cap_and_refused_past_it(
    reader: httpx.Client, now: datetime, method: str, path: str
) -> None:
    cap = READ_CAPS[method][path]
    base = base_calls(now)[method]
    at_cap = _send(reader, method, _with(base, path, _sized(method, path, cap)))
    assert at_cap.status_code == 200, at_cap.text[:300]
    past = _send(reader, method, _with(base, path, _sized(method, path, cap + 1)))
    assert past.status_code == 422, past.text[:300]
    [detail] = past.json()["detail"]
    assert detail["loc"][-1] == path.rsplit(".", 1)[-1], detail
    if _is_number(method, path):
        least = FLOORS.get((method, path), 1)
        under = _send(reader, method, _with(base, path, least - 1))
        assert under.status_code == 422, under.text[:300]
        assert under.json()["detail"][0]["loc"] == ["body", "kwargs", *path.split(".")]


def test_every_read_with_a_sizing_argument_is_walked_above(now: datetime) -> None:
    """A new read with a sizing argument needs a call in base_calls and,
    for a collection, a sample: the test above then sends it to its cap
    and past it."""
    for method in sorted(READ_METHODS):
        sizing = sizing_arguments(getattr(SQLAlchemyStore, method))
        if sizing:
            assert method in base_calls(now), f"{method}: add a call to base_calls"
        for path in sizing:
            sampled = path in SAMPLES or f"{method}:{path}" in SAMPLES
            assert _is_number(method, path) or sampled, f"{method}: add a sample of {path}"


def _tasks(store: SQLAlchemyStore, now: datetime, n: int) -> list[int]:
    tasks = [
        Task(
            type="sleep", args=(i,), next_run=now, deadline=now, schedule_kind=ScheduleKind.ONESHOT
        )
        for i in range(n)
    ]
    return [t.id for t in store.create_tasks(tasks, now=now) if t.id is not None]


def test_a_read_only_token_cannot_sweep_the_whole_ledger(
    store: SQLAlchemyStore,
    sleep_type: TaskType,
    now: datetime,
    reader: httpx.Client,
    client: httpx.Client,
) -> None:
    """On 413f804 a read-only token's sweep_conditions with a span of 10**9
    returned the id of every task (300k tasks: 2 MB, 1.7-4 s a call)."""
    ids = _tasks(store, now, 2_000)
    sweep = {"type_versions": {}, "after_id": 0, "span": 10**9}
    refused = _post(reader, "sweep_conditions", sweep)
    assert refused.status_code == 403, refused.text[:300]
    for method, kwargs in (
        ("conditions_to_assess", {"now": now, "type_versions": {}}),
        ("count_conditions", {}),
        ("condition_frontier", {}),
    ):
        assert _post(reader, method, kwargs).status_code == 403, method
    # the read-write token: within the census step's own span
    past = _post(client, "sweep_conditions", sweep)
    assert past.status_code == 422, past.text[:300]
    assert past.json()["detail"][0]["loc"] == ["body", "kwargs", "span"]
    served = _post(client, "sweep_conditions", {**sweep, "span": SWEEP})
    assert served.status_code == 200, served.text[:300]
    assert served.json()["result"] == ids  # none has a ledger row yet


@pytest.mark.parametrize("method", ["sweep_conditions", "conditions_to_assess"])
def test_a_map_of_task_types_too_large_for_a_statement_is_a_422_naming_it(
    store: SQLAlchemyStore,
    sleep_type: TaskType,
    now: datetime,
    reader: httpx.Client,
    client: httpx.Client,
    method: str,
) -> None:
    """70,000 types: 210,000 parameters, past PostgreSQL's 65,535 (on
    413f804 a 503 "cannot reach the database", with a read-only token)."""
    versions = {f"t{i}": "v" for i in range(70_000)}
    kwargs: dict[str, Any] = {"type_versions": versions}
    kwargs.update({"after_id": 0, "span": 10} if method == "sweep_conditions" else {"now": now})
    assert _post(reader, method, kwargs).status_code == 403
    answer = _post(client, method, kwargs)
    assert answer.status_code == 422, answer.text[:300]
    assert answer.json()["detail"][0]["loc"] == ["body", "kwargs", "type_versions"]
    # at the cap, served
    kwargs["type_versions"] = {f"t{i}": "v" for i in range(MAX_TYPE_VERSIONS)}
    assert _post(client, method, kwargs).status_code == 200
