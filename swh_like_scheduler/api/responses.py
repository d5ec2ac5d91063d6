"""What the API answers, typed: the response models of the OpenAPI document.

Instants are ISO 8601 text, durations seconds (a number), as everywhere in
the API. A callback's header values read ``***`` (write-only)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Seconds = float


class Out(BaseModel):
    # what the server adds later is not a breaking change for readers
    model_config = ConfigDict(extra="allow")


class TaskTypeOut(Out):
    type: str
    backend_name: str
    description: str
    queue: str
    default_interval: Seconds | None
    min_interval: Seconds | None
    max_interval: Seconds | None
    backoff_factor: float | None
    max_queue_length: int | None
    num_retries: int | None
    retry_delay: Seconds
    retry_growth: float
    retry_cap: Seconds
    retry_jitter: Seconds
    max_expected_duration: Seconds | None
    max_allowed_duration: Seconds | None
    uses_lease: bool
    #: since when the type is paused (nothing of it is dispatched); null: not paused
    paused_at: str | None = None
    #: what happens to missed firings: ``latest`` (run once, late) or ``skip``
    catch_up: Literal["latest", "skip"] = "latest"
    catch_up_grace: Seconds | None = None


class BlackoutOut(Out):
    start: str
    end: str


class TaskOut(Out):
    id: int | None
    type: str
    args: list[Any]
    kwargs: dict[str, Any]
    key: str | None
    policy: Literal["oneshot", "recurring"]
    schedule_kind: Literal["oneshot", "periodic", "cron", "adaptive"]
    status: Literal["waiting", "scheduled", "completed", "disabled", "cancelled"]
    priority: Literal["high", "normal", "low"]
    next_run: str = Field(
        description="The earliest start (can_start_by): it may not start before, ISO 8601"
    )
    deadline: str = Field(
        description="The latest start (should_start_by): it should start by then to finish "
        "in time, ISO 8601"
    )
    current_interval: Seconds | None
    period: Seconds | None
    cooldown: Seconds | None
    #: the cooldown is the default one, which follows the period and the
    #: run time (``false``: a client gave it, and it stays)
    cooldown_is_default: bool = False
    cron: str | None
    cron_max_duration: Seconds | None
    max_delay: Seconds | None
    #: the task's own catch-up setting (``null``: its type's)
    catch_up: Literal["latest", "skip"] | None = None
    catch_up_grace: Seconds | None = None
    #: the firing a skip of missed firings resumed at
    skipped_until: str | None = None
    tz: str
    blackout_periods: list[dict[str, Any]]
    dont_run_on_nodes: list[str]
    max_expected_duration: Seconds | None
    max_allowed_duration: Seconds | None
    expected_duration: Seconds | None
    retries_left: int
    failure_count: int
    last_good_start_at: str | None
    last_good_end_at: str | None
    last_start_at: str | None
    last_end_at: str | None
    average_good_duration: Seconds | None
    owner_node: str | None
    owner_name: str | None
    owner_started_at: str | None
    created_at: str | None
    updated_at: str | None


class TasksOut(Out):
    tasks: list[TaskOut]
    #: with a page: where the next page starts (``null``: the last one)
    next_after_id: int | None = None


class ActedOut(Out):
    changed: bool
    task: TaskOut
    #: why the action changed nothing (``None`` when it changed the task)
    reason: str | None = None


class RunOut(Out):
    id: int | None
    task_id: int
    backend_id: str
    slot: str
    scheduled: str
    started: str | None
    ended: str | None
    status: str
    worker: str | None
    error: str | None
    progress: float | None
    result: Any
    history: list[dict[str, Any]]


class InstantRunOut(Out):
    backend_id: str
    status: str
    started: str | None
    ended: str | None
    error: str | None


class InstantOut(Out):
    at: str
    state: Literal["pending", "dispatched", "running", "done", "failed", "expired", "cancelled"]
    task_id: int | None
    next_run: str = Field(description="The task's earliest start (can_start_by), ISO 8601")
    run: InstantRunOut | None


class JobOut(Out):
    key: str
    instants: list[InstantOut]
    added: list[str]
    removed: list[str]
    kept: list[str]


class ConditionOut(Out):
    id: int | None
    type: str
    level: Literal["OK", "WARNING", "ERROR"]
    reason: str
    detail: str


class ConditionsOut(Out):
    now: str
    #: per type, tasks per level, as last counted (``null``: not counted yet)
    counts: dict[str, dict[str, int]] | None
    counts_age_seconds: float | None
    tasks: list[ConditionOut]
    next_after_id: int | None


class HealthOut(Out):
    status: Literal["ok", "degraded", "unavailable"]
    reasons: list[str]
    stale_after: float
    database: dict[str, Any]
    #: live workers taking tasks without sending task events (started
    #: without -E, their events not turned on): their runs go unrecorded
    workers_without_task_events: list[str] = []
    #: hosts whose clock is off the database's by more than the bound, and
    #: the warnings that say so (the status is unchanged)
    clocks_off: list[dict[str, Any]] = []
    warnings: list[str] = []


__all__ = [
    "ActedOut",
    "ConditionsOut",
    "HealthOut",
    "JobOut",
    "RunOut",
    "TaskOut",
    "TaskTypeOut",
    "TasksOut",
]
