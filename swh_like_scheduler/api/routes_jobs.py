"""``/jobs/{key}``: seed 004's jobs by key (:mod:`..jobs`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from ..exceptions import NotFound
from ..jobs import MAX_KEY, JobView, job_from_input
from .app import ApiState
from .deps import READ, WRITE, State
from .responses import JobOut
from .schemas import JobIn

router = APIRouter(prefix="/jobs", tags=["jobs"])
JobKey = Annotated[str, Path(min_length=1, max_length=MAX_KEY)]


def _answer(state: ApiState, view: JobView) -> dict[str, Any]:
    body = view.to_dict()
    if view.cancelled_runs and state.revoke is not None:
        body["revoke_error"] = state.revoke(view.cancelled_runs)
    return body


@router.put("/{key}", dependencies=[WRITE], response_model=JobOut)
def put_job(state: State, key: JobKey, body: JobIn, response: Response) -> dict[str, Any]:
    """Create the job or replace its instants, atomically: instants given
    again are kept (one that already ran does not run again), new ones are
    added, and those left out that have not run are cancelled. 201 when the
    key was new."""
    job = job_from_input(key, body.given(), reach=state.settings.reach)
    view = state.store.put_job(job, now=state.clock())
    if not view.kept and not view.removed and len(view.instants) == len(view.added):
        response.status_code = 201
    return _answer(state, view)


@router.get("/{key}", dependencies=[READ], response_model=JobOut)
def get_job(state: State, key: JobKey) -> dict[str, Any]:
    """Every instant of the job, with its state and latest run."""
    view = state.store.get_job(key)
    if view is None:
        raise NotFound(f"no job with key {key!r}")
    return view.to_dict()


@router.delete("/{key}", dependencies=[WRITE], response_model=JobOut)
def delete_job(state: State, key: JobKey) -> dict[str, Any]:
    """Cancel the instants that have not run; the job's history stays."""
    view = state.store.delete_job(key, now=state.clock())
    if view is None:
        raise NotFound(f"no job with key {key!r}")
    return _answer(state, view)
