"""Request bodies of the HTTP API (pydantic): the shapes and JSON types,
documented in the OpenAPI document. What a value means (a duration's text,
a cron expression, a time zone) is checked by :mod:`..builders`, the same
code as the command line's and the importer's, so every interface refuses
the same input with the same message."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

#: most tasks one ``POST /tasks`` creates
MAX_TASKS_PER_REQUEST = 1000

#: seconds, or text: ``"90"``, ``"5 min"``, ``"1h30m"``, ``"3 days"``, ``"PT5M"``
Duration = StrictInt | StrictFloat | StrictStr


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def given(self) -> dict[str, Any]:
        """The fields the client sent."""
        return self.model_dump(exclude_unset=True)


class BlackoutIn(Body):
    start: StrictStr = Field(examples=["23:00"])
    end: StrictStr = Field(examples=["01:00"])


class TaskTypeIn(Body):
    """A new task type (as ``swh scheduler task-type add``)."""

    type: StrictStr = Field(min_length=1, max_length=200, examples=["load-git"])
    backend_name: StrictStr = Field(min_length=1, max_length=500, examples=["swh.loader.git"])
    description: StrictStr | None = None
    queue: StrictStr | None = None
    default_interval: Duration | None = None
    min_interval: Duration | None = None
    max_interval: Duration | None = None
    backoff_factor: StrictFloat | StrictInt | None = None
    max_queue_length: StrictInt | None = None
    num_retries: StrictInt | None = None
    retry_delay: Duration | None = None
    retry_growth: StrictFloat | StrictInt | None = None
    retry_cap: Duration | None = None
    retry_jitter: Duration | None = None
    max_expected_duration: Duration | None = None
    max_allowed_duration: Duration | None = None
    uses_lease: bool | None = None
    catch_up: Literal["latest", "skip"] | None = Field(
        default=None, description="missed firings: run the latest once (default) or skip them"
    )
    catch_up_grace: Duration | None = Field(
        default=None, description="how late a firing may still run with skip (default 5 min)"
    )


class TaskIn(Body):
    """A new task (as ``swh scheduler task add``); the schedule kind comes
    from ``kind``, else from the parameters given (``cron``, ``period``),
    else from ``policy`` (recurring: adaptive)."""

    type: StrictStr = Field(min_length=1, examples=["load-git"])
    args: list[Any] | None = None
    kwargs: dict[str, Any] | None = None
    key: StrictStr | None = Field(default=None, min_length=1, max_length=500)
    policy: Literal["recurring", "oneshot"] | None = None
    kind: Literal["oneshot", "periodic", "cron", "adaptive"] | None = None
    next_run: StrictStr | None = Field(
        default=None, description="First allowed start, ISO 8601 (default: now)"
    )
    interval: Duration | None = None
    period: Duration | None = None
    cooldown: Duration | None = Field(
        default=None,
        description="Periodic: pause after a good run (default: 90 % of the period less "
        "twice expected_duration; 0: as often as capacity allows)",
    )
    cron: StrictStr | None = None
    cron_max_duration: Duration | None = None
    max_delay: Duration | None = None
    catch_up: Literal["latest", "skip"] | None = Field(
        default=None, description="missed firings: latest or skip (default: the type's)"
    )
    catch_up_grace: Duration | None = Field(
        default=None, description="how late a firing may run with skip (default: the type's)"
    )
    priority: Literal["high", "normal", "low"] | None = None
    tz: StrictStr | None = None
    blackout_periods: list[BlackoutIn] | None = None
    dont_run_on_nodes: list[StrictStr] | None = None
    max_expected_duration: Duration | None = None
    max_allowed_duration: Duration | None = None
    expected_duration: Duration | None = None


class TasksIn(Body):
    tasks: list[TaskIn] = Field(min_length=1, max_length=MAX_TASKS_PER_REQUEST)


class RespawnIn(Body):
    next_run: StrictStr | None = Field(
        default=None, description="When the task may run, ISO 8601 (default: now)"
    )


class CallbackIn(Body):
    type: Literal["rabbitmq", "http"]
    data: dict[str, Any] = Field(
        description="rabbitmq: queue, payload; http: url, payload, method (POST, PUT), headers",
        examples=[{"queue": "training.invitations.notifications", "payload": {"id": "42"}}],
    )


class JobIn(Body):
    """Seed 004's job: a key, the instants, a callback."""

    key: StrictStr | None = Field(default=None, description="if given, the key in the path")
    schedules: list[StrictStr] = Field(
        min_length=1,
        max_length=1000,
        description="at least one instant (DELETE /jobs/{key} cancels a job's instants)",
        examples=[["2020-12-24T14:00:00Z", "2020-12-25T14:00:00Z"]],
    )
    callback: CallbackIn
    max_delay: Duration | None = Field(default=None, description="how late an instant may run")
    priority: Literal["high", "normal", "low"] | None = None


class FieldError(BaseModel):
    """One problem of a request, where it is (``["body", "tasks", 1, "cron"]``)."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorOut(BaseModel):
    """Every error answer: a sentence, or (422) the list of problems."""

    detail: str | list[FieldError]


#: what any operation may answer besides its own success
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "a malformed request (a bad Content-Length...)"},
    401: {"model": ErrorOut, "description": "no valid bearer token"},
    403: {"model": ErrorOut, "description": "a read-only token asked to write"},
    404: {"model": ErrorOut, "description": "nothing by that name or id"},
    409: {"model": ErrorOut, "description": "a conflict: a key or name already taken"},
    413: {"model": ErrorOut, "description": "a body over the size limit"},
    422: {"model": ErrorOut, "description": "bad input: each problem with its location"},
    429: {"model": ErrorOut, "description": "past the client's request rate (see Retry-After)"},
    503: {"model": ErrorOut, "description": "the database (or broker) is not answering"},
}
