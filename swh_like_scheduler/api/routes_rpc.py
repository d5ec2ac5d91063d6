"""``POST /rpc/{method}``: every method of the store interface, for the
remote store (:mod:`..client`), swh-scheduler's RPC pattern.

The body is ``{"args": [...], "kwargs": {...}}`` in the wire format
(:mod:`..wire`); the answer ``{"result": ...}``. Reads need a read token,
everything else a read-write one; every argument that sizes a read's work
is capped (:mod:`.rpc_caps`). A scheduler error travels as itself
(its class and fields, with the status the other routes give it), so the
client raises what the local store would have raised."""

from __future__ import annotations

import inspect
import logging
import random
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException, Path
from fastapi.responses import JSONResponse

from ..domain.exceptions import Conflict, InvalidInput, NotFound, SchedulerError, StoreError
from ..domain.jsonable import without_secrets
from ..domain.model import MAX_JSON_DEPTH, Task
from ..domain.validation import storable, too_deep
from ..intake.jobs import JobView
from ..recording import APPLY_WIRE_NAME, TaskTypeCache, outcome_applier
from ..store import wire
from .auth import Access
from .deps import READ, Credentials, State, bearer_header, require
from .rpc_caps import READ_CAPS, bounded
from .rpc_types import check_call

logger = logging.getLogger(__name__)
router = APIRouter(prefix="/rpc", tags=["remote store"])

#: the store methods served; every other one writes
READ_METHODS = frozenset(
    {
        "get_task_type",
        "get_task_types",
        "get_tasks",
        "get_task_by_key",
        "search_tasks",
        "waiting_entries",
        "count_tasks",
        "preview_bulk",
        "preview_task_type_update",
        "next_ready_time",
        "list_pending",
        "ready_task_ids",
        "long_runs",
        "short_slack",
        "ready_left_behind",
        "get_job",
        "schedule_health",
        "unstarted_run_counts",
        "get_task_run",
        "get_task_runs",
        "count_task_runs",
        "get_workers",
        "database_now",
        "get_host_clocks",
        "lease_terms",
        "current_fence",
        "installation_id",
        "get_listers",
        "get_lister",
        "get_listers_by_id",
        "get_visit_types_for_listed_origins",
        "visit_scheduler_queue_position_get",
        "get_listed_origins",
        "origin_visit_stats_get",
        "get_metrics",
        "peek_next_visits",
        "latest_census",
        "latest_forecast",
        "recorded_forecasts",
        "census_history",
        "problem_page",
    }
)
WRITE_METHODS = frozenset(
    {
        "create_task_type",
        "update_task_type",
        "pause_task_type",
        "resume_task_type",
        "create_tasks",
        "import_tasks",
        "disable_tasks",
        "enable_tasks",
        "cancel_tasks",
        "respawn_tasks",
        "delete_tasks",
        "apply_bulk",
        "update_task",
        "edit_task",
        "claim_ready_tasks",
        "skip_missed_firings",
        "schedule_task_run",
        "start_task_run",
        "start_task_runs",
        "end_task_run",
        "end_task_runs",
        "mark_published",
        "put_job",
        "delete_job",
        "reclaim_unstarted_runs",
        "delete_old_runs",
        "delete_old_batches",
        "delete_finished_oneshot_tasks",
        "acquire_lease",
        "guard_start",
        "release_start",
        "ping_lease",
        "renew_runs",
        "finish_lease",
        "yield_lease",
        "steal_expired_leases",
        "publish_lease_terms",
        "record_worker_sightings",
        "mark_blind_workers",
        "record_host_clock",
        "record_worker_clocks",
        "end_worker_runs",
        "sweep_silent_workers",
        "record_room",
        "record_forecast",
        "expire_oneshot_tasks",
        "measure_type_loads",
        "acquire_lock",
        "release_lock",
        "get_or_create_lister",
        "update_lister",
        "mark_first_visits_scheduled",
        "record_listed_origins",
        "origin_visit_stats_upsert",
        "record_visit_statuses",
        "update_metrics",
        "grab_next_visits",
        "visit_scheduler_queue_position_set",
        "put_conditions",
        "drop_conditions",
        "save_census",
        # the census step's scans: whole-ledger reads that only the process
        # refreshing the census needs, and it writes what they find
        "conditions_to_assess",
        "condition_frontier",
        "sweep_conditions",
        "count_conditions",
    }
)
METHODS = READ_METHODS | WRITE_METHODS
__all__ = ["METHODS", "READ_CAPS", "READ_METHODS", "WRITE_METHODS", "router"]


#: deepest nesting of a call's ``args`` or ``kwargs``, checked without
#: recursion before anything that recurses (the check of stored text, the
#: decoder): deep enough that the store's own rule (task arguments at most
#: MAX_JSON_DEPTH deep) answers what it can; a value that still exhausts the
#: interpreter's recursion below it is refused as well
MAX_RPC_DEPTH = 16 * MAX_JSON_DEPTH


def error_status(error: SchedulerError) -> int:
    if isinstance(error, Conflict):
        return 409
    if isinstance(error, NotFound):
        return 404
    if isinstance(error, InvalidInput):
        return 422
    return 503 if isinstance(error, StoreError) else 500


def _access(
    state: State,
    method: Annotated[str, Path(max_length=100)],
    credentials: Credentials = None,
) -> str:
    if method not in METHODS:
        raise HTTPException(status_code=404, detail=f"no store method {method!r}")
    wanted = Access.READ if method in READ_METHODS else Access.WRITE
    require(state, bearer_header(credentials), wanted)
    return method


@router.post("/{method}")
def call(
    state: State,
    method: Annotated[str, Depends(_access)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> Any:
    """Call store method ``method`` with ``args`` and ``kwargs``."""
    body = body or {}
    unknown = sorted(set(body) - {"args", "kwargs"})
    if unknown:
        raise InvalidInput(unknown[0], "is not args or kwargs")
    for name in ("args", "kwargs"):
        if too_deep(body.get(name), MAX_RPC_DEPTH):
            raise InvalidInput(
                name, f"nests lists and objects more than {MAX_RPC_DEPTH} levels deep"
            )
    try:
        # no stored text holds a NUL or a lone surrogate: nothing to look for
        storable("args", body.get("args"))
        storable("kwargs", body.get("kwargs"))
        args = wire.decode(body.get("args", []), where="args")
        kwargs = wire.decode(body.get("kwargs", {}), where="kwargs")
    except RecursionError:
        raise InvalidInput("args", "nests lists and objects too deep to be read") from None
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise InvalidInput("args", "args must be a list and kwargs an object")
    if "apply" in kwargs and kwargs["apply"] is not None:
        if kwargs["apply"] != APPLY_WIRE_NAME:
            raise InvalidInput("apply", f"only {APPLY_WIRE_NAME!r} is applied by a server")
        kwargs["apply"] = outcome_applier(TaskTypeCache(state.store), random.Random())
    target = getattr(state.store, method)
    try:
        bound = inspect.signature(target).bind(*args, **kwargs)
    except TypeError as exc:
        raise InvalidInput("kwargs", str(exc)) from None
    check_call(target, bound)
    bounded(method, bound)
    try:
        result = target(*args, **kwargs)
    except SchedulerError as error:
        return JSONResponse(
            status_code=error_status(error),
            content={"detail": str(error), "error": wire.encode_error(error)},
        )
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        # values of the wrong kind (a text where ids go...): the caller's
        logger.warning("rpc %s: arguments refused", method, exc_info=True)
        raise InvalidInput("args", f"do not fit {method}: {type(exc).__name__}: {exc}") from None
    if method in READ_METHODS:
        result = hidden(result)
    return {"result": wire.encode(result)}


def hidden(value: Any) -> Any:
    """A read's result with the tasks' secrets hidden (:func:`without_secrets`):
    tasks, lists of tasks, jobs."""
    if isinstance(value, Task):
        return without_secrets(value)
    if isinstance(value, list | tuple):
        return type(value)(hidden(v) for v in value)
    if isinstance(value, JobView):
        instants = tuple(replace(i, task=without_secrets(i.task)) for i in value.instants)
        return replace(value, instants=instants)
    return value


@router.get("", dependencies=[READ])
def capabilities(state: State) -> dict[str, Any]:
    """The store's capability flags and the methods served."""
    return {
        "capabilities": wire.encode(state.store.capabilities),
        "methods": sorted(METHODS),
        "max_argument_bytes": getattr(state.store, "max_argument_bytes", None),
    }
