"""``/tasks``: bulk create, search, get, act (cancel, respawn, disable,
enable), explain, runs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from .. import policy
from ..domain.exceptions import InvalidInput, NotFound
from ..domain.jsonable import plain, run_json, task_json
from ..domain.model import Priority, RunStatus, ScheduleKind, Task, TaskStatus, TaskType
from ..domain.validation import parse_datetime
from ..health import conditions
from ..health.waits import why_it_waits
from ..intake.builders import task_from_input
from ..store import TaskFilter
from .deps import READ, WRITE, State
from .responses import ActedOut, RunOut, TaskOut, TasksOut
from .schemas import MAX_ID, Instant, NoNul, RespawnIn, TasksIn

router = APIRouter(prefix="/tasks", tags=["tasks"])

#: largest page of a search
MAX_PAGE = 1000
TaskId = Annotated[int, Path(ge=1, le=MAX_ID)]
#: a task's client key in a path
TaskKey = Annotated[NoNul, Path(max_length=500)]


@router.post("", status_code=201, dependencies=[WRITE], response_model=TasksOut)
def create_tasks(state: State, body: TasksIn, request: Request) -> dict[str, Any]:
    """Create up to 1,000 tasks at once, all or none. A task with a key
    already used returns the existing one if its definition is the same
    (409 otherwise); a task identical to a live one without a key returns
    that one. A ``webhook`` task's ``url`` must go where callbacks may
    (public addresses, else the setting ``callback_allow``): 422 naming it."""
    now = state.clock()
    types: dict[str, TaskType | None] = {}
    tasks = []
    for index, item in enumerate(body.tasks):
        request.state.error_prefix = ["body", "tasks", index]
        if item.type not in types:
            types[item.type] = state.store.get_task_type(item.type)
        task_type = types[item.type]
        if task_type is None:
            raise InvalidInput("type", f"no task type named {item.type!r}")
        values = item.given()
        values.pop("type")
        tasks.append(task_from_input(values, task_type, now=now, reach=state.settings.reach))
    request.state.error_prefix = ["body", "tasks"]
    created = state.store.create_tasks(tasks, now=now)
    return {"tasks": [plain(task_json(t)) for t in created]}


def _instant(field: str, value: str | None) -> datetime | None:
    return None if value is None else parse_datetime(field, value)


@router.get("", dependencies=[READ], response_model=TasksOut)
def search_tasks(
    state: State,
    request: Request,
    type: Annotated[NoNul | None, Query(max_length=200)] = None,
    status: Annotated[list[TaskStatus] | None, Query()] = None,
    priority: Priority | None = None,
    kind: ScheduleKind | None = None,
    key_prefix: Annotated[NoNul | None, Query(max_length=500)] = None,
    next_run_before: Annotated[
        Instant | None,
        Query(description="ISO 8601: only tasks whose earliest start (next_run) is before it"),
    ] = None,
    after_id: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
) -> dict[str, Any]:
    """Tasks by increasing id. Page with ``after_id``: each page gives the
    ``next_after_id`` of the next one (``null`` on the last page)."""
    request.state.error_prefix = ["query"]
    criteria = TaskFilter(
        type=type,
        status=status,
        priority=priority,
        schedule_kind=kind,
        key_prefix=key_prefix,
        next_run_before=_instant("next_run_before", next_run_before),
    )
    found = state.store.search_tasks(criteria, after_id=after_id, limit=limit)
    following = found[-1].id if len(found) == limit else None
    return {"tasks": [plain(task_json(t)) for t in found], "next_after_id": following}


def _task(state: Any, task_id: int) -> Task:
    found = state.store.get_tasks([task_id])
    if not found:
        raise NotFound(f"no task with id {task_id}")
    task: Task = found[0]
    return task


@router.get("/by-key/{key}", dependencies=[READ], response_model=TaskOut)
def get_task_by_key(state: State, key: TaskKey) -> dict[str, Any]:
    found = state.store.get_task_by_key(key)
    if found is None:
        raise NotFound(f"no task with key {key!r}")
    return plain(task_json(found))


@router.get("/{task_id}", dependencies=[READ], response_model=TaskOut)
def get_task(state: State, task_id: TaskId) -> dict[str, Any]:
    return plain(task_json(_task(state, task_id)))


def _acted(
    state: Any, task_id: int, action: str, act: Callable[[list[int]], list[Task]]
) -> dict[str, Any]:
    """What ``action`` did: the task, whether it changed, and why not."""
    changed = act([task_id])
    task = changed[0] if changed else _task(state, task_id)
    reason = (
        None
        if changed
        else conditions.unchanged_reason(state.store, action, task_id, state.clock())
    )
    return {"changed": bool(changed), "task": plain(task_json(task)), "reason": reason}


@router.post("/{task_id}/cancel", dependencies=[WRITE], response_model=ActedOut)
def cancel_task(state: State, task_id: TaskId) -> dict[str, Any]:
    """Cancel: a dispatched run is revoked (and refused at start if a worker
    missed the revoke); a running leased run stops at its next ping."""
    now = state.clock()
    answer = _acted(state, task_id, "cancel", lambda ids: state.store.cancel_tasks(ids, now=now))
    if answer["changed"] and state.revoke is not None:
        runs = state.store.get_task_runs(task_id, limit=1)
        pending = [r.backend_id for r in runs if r.status is RunStatus.CANCELLED and not r.started]
        if pending:
            answer["revoke_error"] = state.revoke(pending)
    return answer


@router.post("/{task_id}/respawn", dependencies=[WRITE], response_model=ActedOut)
def respawn_task(
    state: State, task_id: TaskId, request: Request, body: RespawnIn | None = None
) -> dict[str, Any]:
    """Make the task runnable again now (or at ``next_run``), whatever its status."""
    now = state.clock()
    at = _instant("next_run", body.next_run if body else None) or now
    return _acted(
        state, task_id, "respawn", lambda ids: state.store.respawn_tasks(ids, next_run=at, now=now)
    )


@router.post("/{task_id}/disable", dependencies=[WRITE], response_model=ActedOut)
def disable_task(state: State, task_id: TaskId) -> dict[str, Any]:
    """Take the task out of scheduling (a running run finishes)."""
    now = state.clock()
    return _acted(state, task_id, "disable", lambda ids: state.store.disable_tasks(ids, now=now))


@router.post("/{task_id}/enable", dependencies=[WRITE], response_model=ActedOut)
def enable_task(state: State, task_id: TaskId) -> dict[str, Any]:
    """Put a disabled task back into scheduling."""
    now = state.clock()
    return _acted(state, task_id, "enable", lambda ids: state.store.enable_tasks(ids, now=now))


@router.get("/{task_id}/explain", dependencies=[READ])
def explain_task(
    state: State,
    task_id: TaskId,
    request: Request,
    at: Annotated[Instant | None, Query(description="ISO 8601 (default: now)")] = None,
) -> dict[str, Any]:
    """Why the task is (not) running: its start times, condition, and what moved them;
    for a task that is due, where it stands in line (``waits``)."""
    request.state.error_prefix = ["query"]
    task = _task(state, task_id)
    task_type = state.store.get_task_type(task.type)
    if task_type is None:  # pragma: no cover - the foreign key forbids it
        raise NotFound(f"no task type named {task.type!r}")
    instant = _instant("at", at) or state.clock()
    failure = conditions.last_failure(state.store, task_id)
    run = conditions.latest_run_state(
        state.store,
        task,
        instant,
        queue=task_type.effective_queue,
        backend=task_type.backend_name,
    )
    answer = policy.explain(task, task_type, instant, last_failure=failure, run=run)
    line = why_it_waits(state.store, task, task_type, instant)
    return plain({**answer.to_dict(), "waits": None if line is None else line.to_dict()})


@router.get("/{task_id}/runs", dependencies=[READ], response_model=list[RunOut])
def task_runs(
    state: State, task_id: TaskId, limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20
) -> list[dict[str, Any]]:
    """The task's latest runs, newest first."""
    _task(state, task_id)
    return [plain(run_json(r)) for r in state.store.get_task_runs(task_id, limit=limit)]
