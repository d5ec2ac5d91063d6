"""``PATCH /tasks/{id}``, ``PATCH /tasks/by-key/{key}`` and ``PATCH
/task-types/{name}``: edit in place (as ``swh scheduler task update`` and
``task-type update``).

The body is an object of the fields to change, each as in ``POST /tasks``
or ``POST /task-types`` (durations as seconds or text, ``args`` a list,
``kwargs`` an object, ``blackout_periods`` a list of windows); ``null``
unsets a nullable field. Which fields, and which of them may change while a
run holds the task: :mod:`..editing`. A refused field answers 422 naming
it; a change a run's hold forbids, or one that would make a task identical
to another, answers 409; nothing is written then.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import ConfigDict, Field, StrictBool

from ..domain.exceptions import InvalidInput
from ..domain.jsonable import plain, task_json, task_type_json
from ..intake.editing import task_changes, task_type_changes
from .deps import WRITE, State
from .responses import TaskOut, TaskTypeOut
from .routes_tasks import TaskId, TaskKey
from .routes_types import TypeName
from .schemas import (
    BlackoutIn,
    Body,
    CatchUp,
    Count,
    Cron,
    Duration,
    Factor,
    Growth,
    Identifier,
    Nodes,
    PositiveDuration,
    Priority,
    Text,
    Zone,
)

router = APIRouter(tags=["edit"])


def _edit_schema(schema: dict[str, Any]) -> None:
    """An edit names at least one field; a field left out is left as it
    is (no default)."""
    schema["minProperties"] = 1
    for field in schema.get("properties", {}).values():
        field.pop("default", None)


#: a field an edit may leave out but not unset (``null`` is refused)
KEEP: Any = Field(default=None)


class Changes(Body):
    """The fields an edit changes: at least one."""

    model_config = ConfigDict(json_schema_extra=_edit_schema)


class TaskChangesIn(Changes):
    """The fields of a task to change: ``null`` unsets a nullable one."""

    kind: Literal["oneshot", "periodic", "cron", "adaptive"] = KEEP
    period: PositiveDuration | None = None
    cooldown: Duration | None = None
    cron: Cron | None = None
    cron_max_duration: PositiveDuration | None = None
    interval: PositiveDuration | None = None
    max_delay: Duration | None = None
    priority: Priority = KEEP
    args: list[Any] = KEEP
    kwargs: dict[str, Any] = KEEP
    tz: Zone = KEEP
    blackout_periods: list[BlackoutIn] | None = None
    dont_run_on_nodes: Nodes | None = None
    max_expected_duration: PositiveDuration | None = None
    max_allowed_duration: PositiveDuration | None = None
    expected_duration: Duration | None = None
    reset_retries: Annotated[
        Literal[True], Field(description="true: the retry budget starts afresh")
    ] = KEEP
    catch_up: CatchUp | None = None
    catch_up_grace: PositiveDuration | None = None


class TaskTypeChangesIn(Changes):
    """The settings of a task type to change: ``null`` unsets a nullable one."""

    description: Text = KEEP
    backend_name: Identifier = KEEP
    queue: Identifier | None = None
    default_interval: PositiveDuration | None = None
    min_interval: PositiveDuration | None = None
    max_interval: PositiveDuration | None = None
    backoff_factor: Factor | None = None
    max_queue_length: Count | None = None
    num_retries: Count | None = None
    retry_delay: Duration = KEEP
    retry_growth: Growth = KEEP
    retry_cap: Duration = KEEP
    retry_jitter: Duration = KEEP
    max_expected_duration: PositiveDuration | None = None
    max_allowed_duration: PositiveDuration | None = None
    uses_lease: StrictBool = KEEP
    catch_up: CatchUp = KEEP
    catch_up_grace: PositiveDuration = KEEP


def _given(request: Request, body: Changes) -> dict[str, Any]:
    request.state.error_prefix = ["body"]
    given = body.given()
    if not given:
        raise InvalidInput("body", "names no field to change")
    return given


@router.patch("/tasks/{task_id}", dependencies=[WRITE], response_model=TaskOut)
def edit_task(
    state: State, task_id: TaskId, request: Request, body: TaskChangesIn
) -> dict[str, Any]:
    """Change fields of task ``task_id``; its times are computed again by the
    policy engine (404 for an unknown task)."""
    changes = task_changes(_given(request, body))
    edited = state.store.edit_task(task_id=task_id, changes=changes, now=state.clock())
    return plain(task_json(edited))


@router.patch("/tasks/by-key/{key}", dependencies=[WRITE], response_model=TaskOut)
def edit_task_by_key(
    state: State, key: TaskKey, request: Request, body: TaskChangesIn
) -> dict[str, Any]:
    """Change fields of the task with client key ``key`` (404 if none)."""
    changes = task_changes(_given(request, body))
    edited = state.store.edit_task(key=key, changes=changes, now=state.clock())
    return plain(task_json(edited))


@router.patch("/task-types/{name}", dependencies=[WRITE], response_model=TaskTypeOut)
def edit_task_type(
    state: State, name: TypeName, request: Request, body: TaskTypeChangesIn
) -> dict[str, Any]:
    """Change settings of task type ``name`` (404 for an unknown type)."""
    changes = task_type_changes(_given(request, body))
    updated = state.store.update_task_type(name, now=state.clock(), **changes)
    return plain(task_type_json(updated))
