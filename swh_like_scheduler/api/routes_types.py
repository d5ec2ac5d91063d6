"""``/task-types``: list, get, create, pause and resume."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from ..domain.exceptions import NotFound
from ..domain.jsonable import plain, task_type_json
from ..intake.builders import task_type_from_input
from .deps import READ, WRITE, State
from .responses import TaskTypeOut
from .schemas import NoNul, TaskTypeIn

router = APIRouter(prefix="/task-types", tags=["task types"])
#: a task type's name in a path (one that is not a valid name is simply unknown: 404)
TypeName = Annotated[NoNul, Path(max_length=200)]


@router.get("", dependencies=[READ], response_model=list[TaskTypeOut])
def list_task_types(state: State) -> list[dict[str, Any]]:
    """Every task type, by name."""
    return [plain(task_type_json(t)) for t in state.store.get_task_types()]


@router.get("/{name}", dependencies=[READ], response_model=TaskTypeOut)
def get_task_type(state: State, name: TypeName) -> dict[str, Any]:
    found = state.store.get_task_type(name)
    if found is None:
        raise NotFound(f"no task type named {name!r}")
    return plain(task_type_json(found))


@router.post("", status_code=201, dependencies=[WRITE], response_model=TaskTypeOut)
def create_task_type(state: State, body: TaskTypeIn) -> dict[str, Any]:
    """Register a task type (409 if the name is taken)."""
    created = state.store.create_task_type(task_type_from_input(body.given()))
    return plain(task_type_json(created))


@router.post("/{name}/pause", dependencies=[WRITE], response_model=TaskTypeOut)
def pause_task_type(state: State, name: TypeName) -> dict[str, Any]:
    """Stop dispatching the type's tasks (404 for an unknown type). They
    keep waiting; runs already dispatched finish. ``paused_at`` says since
    when; pausing a paused type keeps its first instant."""
    paused = state.store.pause_task_type(name, now=state.clock())
    return plain(task_type_json(paused))


@router.post("/{name}/resume", dependencies=[WRITE], response_model=TaskTypeOut)
def resume_task_type(state: State, name: TypeName) -> dict[str, Any]:
    """Dispatch the type's tasks again (404 for an unknown type)."""
    return plain(task_type_json(state.store.resume_task_type(name)))
