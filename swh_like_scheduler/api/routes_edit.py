"""``PATCH /tasks/{id}``, ``PATCH /tasks/by-key/{key}`` and ``PATCH
/task-types/{name}``: edit in place (as ``swh scheduler task update`` and
``task-type update``).

The body is an object of the fields to change, each as on the command line
or in ``POST /tasks`` (durations as seconds or text, ``args`` a list,
``kwargs`` an object, ``blackout_periods`` a list of windows); ``null`` (or
``"none"``) unsets a nullable field. Which fields, and which of them may
change while a run holds the task: :mod:`..editing`. A refused field
answers 422 naming it; a change a run's hold forbids, or one that would make
a task identical to another, answers 409; nothing is written then.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Request

from ..editing import task_changes, task_type_changes
from ..exceptions import InvalidInput
from ..jsonable import plain, task_json, task_type_json
from .deps import WRITE, State
from .responses import TaskOut, TaskTypeOut
from .routes_tasks import TaskId

router = APIRouter(tags=["edit"])

Changes = Annotated[
    dict[str, Any],
    Body(
        description="The fields to change (null unsets a nullable one)",
        examples=[{"period": "2h", "priority": "high"}],
    ),
]


def _given(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    request.state.error_prefix = ["body"]
    if not body:
        raise InvalidInput("body", "names no field to change")
    return body


@router.patch("/tasks/{task_id}", dependencies=[WRITE], response_model=TaskOut)
def edit_task(state: State, task_id: TaskId, request: Request, body: Changes) -> dict[str, Any]:
    """Change fields of task ``task_id``; its times are computed again by the
    policy engine (404 for an unknown task)."""
    changes = task_changes(_given(request, body))
    edited = state.store.edit_task(task_id=task_id, changes=changes, now=state.clock())
    return plain(task_json(edited))


@router.patch("/tasks/by-key/{key}", dependencies=[WRITE], response_model=TaskOut)
def edit_task_by_key(
    state: State, key: Annotated[str, Path(max_length=500)], request: Request, body: Changes
) -> dict[str, Any]:
    """Change fields of the task with client key ``key`` (404 if none)."""
    changes = task_changes(_given(request, body))
    edited = state.store.edit_task(key=key, changes=changes, now=state.clock())
    return plain(task_json(edited))


@router.patch("/task-types/{name}", dependencies=[WRITE], response_model=TaskTypeOut)
def edit_task_type(
    state: State, request: Request, body: Changes, name: str = Path(max_length=200)
) -> dict[str, Any]:
    """Change settings of task type ``name`` (404 for an unknown type)."""
    changes = task_type_changes(_given(request, body))
    updated = state.store.update_task_type(name, now=state.clock(), **changes)
    return plain(task_type_json(updated))
