"""``POST /tasks/bulk/{action}``: disable, enable, cancel or delete every
task a filter matches (:meth:`SchedulerStore.apply_bulk`), one window of
ids per request; ``dry_run`` counts only."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import AfterValidator, ConfigDict, Field, StrictBool, WithJsonSchema
from pydantic_core import PydanticCustomError

from ..domain.model import ScheduleKind, TaskStatus
from ..store.values import BULK_MAX_IDS, BulkAction, BulkFilter
from .deps import WRITE, State
from .responses import Out
from .schemas import MAX_ID, Body, Identifier, Key, TaskIdIn, Whole, ecma

router = APIRouter(prefix="/tasks/bulk", tags=["tasks"])

#: most tasks one request reads (a client goes on with ``next_after_id``)
MAX_SCAN = 10_000
#: most arguments a filter compares
MAX_ARGUMENTS = 20


#: a keyword argument's name (ASCII), or a position of at most 6 digits
ARGUMENT = r"^([A-Za-z_][A-Za-z0-9_]*|[0-9]{1,6})$"
#: the criteria: a filter needs one of them (given, not null), or ``all``
CRITERIA: dict[str, dict[str, Any]] = {
    "type": {"type": "string"},
    "kind": {"type": "string"},
    "status": {"type": "array"},
    "condition": {"type": "array"},
    "key_prefix": {"type": "string"},
    "arguments": {"type": "object", "minProperties": 1},
    "ids": {"type": "array"},
}


def _argument_names(value: dict[str, Any]) -> dict[str, Any]:
    for name in value:
        if ecma(ARGUMENT).search(name) is None:
            raise PydanticCustomError(
                "value_error",
                "{name} is neither a keyword argument's name nor a position (0, 1...)",
                {"name": repr(name[:60])},
            )
    return value


Arguments = Annotated[
    dict[str, Any],
    Field(max_length=MAX_ARGUMENTS),
    AfterValidator(_argument_names),
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": MAX_ARGUMENTS,
            "propertyNames": {"pattern": ARGUMENT},
        }
    ),
]


def _needs_a_criterion(schema: dict[str, Any]) -> None:
    """A filter names a criterion (given, not null), or asks for ``all``."""
    cases = [{"required": [name], "properties": {name: rule}} for name, rule in CRITERIA.items()]
    schema["anyOf"] = [*cases, {"required": ["all"], "properties": {"all": {"const": True}}}]


class BulkIn(Body):
    """The filter (every criterion given must hold) and the window."""

    model_config = ConfigDict(json_schema_extra=_needs_a_criterion)

    type: Identifier | None = None
    kind: ScheduleKind | None = None
    status: list[TaskStatus] | None = Field(default=None, min_length=1, max_length=5)
    condition: list[Literal["OK", "WARNING", "ERROR"]] | None = Field(
        default=None, min_length=1, max_length=3
    )
    key_prefix: Key | None = None
    arguments: Arguments | None = Field(
        default=None,
        description="keyword arguments (or positions '0', '1'...) and the values they "
        "must equal (as JSON values)",
        examples=[{"url": "https://example.org/repo.git"}],
    )
    ids: list[TaskIdIn] | None = Field(default=None, max_length=BULK_MAX_IDS)
    all: StrictBool = Field(default=False, description="no criterion: every task is meant")
    dry_run: StrictBool = Field(default=False, description="count only, change nothing")
    after_id: Whole = Field(default=0, ge=0, le=MAX_ID)
    scan: Whole = Field(default=MAX_SCAN, ge=1, le=MAX_SCAN)
    batch_size: Whole = Field(default=1000, ge=1, le=10_000)


class BulkOut(Out):
    action: str
    dry_run: bool
    matched: int
    changed: int
    held: int
    sample: list[int]
    next_after_id: int | None
    revoke_error: str | None = None


@router.post("/{action}", dependencies=[WRITE], response_model=BulkOut)
def act_on_matching_tasks(
    state: State, action: BulkAction, body: BulkIn, request: Request
) -> dict[str, Any]:
    """Apply ``action`` (disable, enable, cancel, delete) to the tasks with
    ids above ``after_id`` that the filter matches, reading at most ``scan``
    of them, ``batch_size`` per transaction; go on with ``next_after_id``
    (``null``: done). ``condition`` is computed at the server's now. A
    filter with no criterion is refused (422) unless ``all`` is true. A
    cancel revokes the dispatched runs it ended; a delete keeps the tasks
    with an open run (``held``). ``dry_run`` counts what would change."""
    request.state.error_prefix = ["body"]
    criteria = BulkFilter(
        type=body.type,
        schedule_kind=body.kind,
        status=tuple(body.status) if body.status is not None else None,
        condition=tuple(body.condition) if body.condition is not None else None,
        key_prefix=body.key_prefix,
        arguments=tuple((body.arguments or {}).items()),
        ids=tuple(body.ids) if body.ids is not None else None,
        everything=body.all,
    )
    now = state.clock()
    after, scan = body.after_id, body.scan
    if body.dry_run:
        report = state.store.preview_bulk(action, criteria, now=now, after_id=after, scan=scan)
    else:
        report = state.store.apply_bulk(
            action, criteria, now=now, after_id=after, scan=scan, batch_size=body.batch_size
        )
    answer: dict[str, Any] = {
        "action": report.action.value,
        "dry_run": body.dry_run,
        "matched": report.matched,
        "changed": report.changed,
        "held": report.held,
        "sample": list(report.sample),
        "next_after_id": report.next_after_id,
    }
    if report.revoke and state.revoke is not None:
        answer["revoke_error"] = state.revoke(list(report.revoke))
    return answer
