"""``/jobs/{key}``: seed 004's jobs by key (:mod:`..jobs`), and their body."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Response
from pydantic import ConfigDict, Field, StrictStr

from ..domain.exceptions import NotFound
from ..intake.jobs import MAX_INSTANTS, MAX_KEY, JobView, job_from_input
from .deps import READ, WRITE, State
from .responses import JobOut
from .schemas import Body, Duration, NoNul, Priority, ZonedInstant
from .state import ApiState

router = APIRouter(prefix="/jobs", tags=["jobs"])
JobKey = Annotated[NoNul, Path(min_length=1, max_length=MAX_KEY)]

#: an HTTP header name (RFC 9110's token), and a value without a line break
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
HEADER_VALUE = r"^[^\r\n\x00]*$"
#: what ``str.strip`` takes away (``str.isspace``), spelled out: a regex's
#: ``\s`` differs between readers
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: a RabbitMQ queue: not blank, not starting with ``amq.`` (reserved), no
#: NUL; the server also holds it to 255 bytes of UTF-8 (a schema counts characters)
QUEUE = (
    rf"^([^{_SPACE}a\x00][^\x00]*|[{_SPACE}][^\x00]*[^{_SPACE}\x00][^\x00]*"
    r"|a|a[^m\x00][^\x00]*|am|am[^q\x00][^\x00]*|amq|amq[^.\x00][^\x00]*)$"
)
URL = r"^https?://[^\x00]*$"
_OBJECT: dict[str, Any] = {"type": "object"}
#: the data of each callback type; the server's checks are :class:`..jobs.Callback`'s
CALLBACK_DATA: dict[str, dict[str, Any]] = {
    "rabbitmq": {
        "type": "object",
        "description": "publish payload to queue (the notify worker)",
        "properties": {
            "queue": {
                "type": "string",
                "pattern": QUEUE,
                "maxLength": 255,
                "examples": ["training.invitations.notifications"],
            },
            "payload": _OBJECT,
        },
        "required": ["queue"],
        "additionalProperties": False,
    },
    "http": {
        "type": "object",
        "description": "send payload to url (the webhook worker): public addresses, else "
        "the setting callback_allow",
        "properties": {
            "url": {"type": "string", "pattern": URL, "examples": ["https://example.org/hook"]},
            "payload": _OBJECT,
            "method": {"enum": ["POST", "PUT"]},
            "headers": {
                "type": "object",
                "propertyNames": {"pattern": HEADER_NAME},
                "additionalProperties": {"type": "string", "pattern": HEADER_VALUE},
            },
        },
        "required": ["url"],
        "additionalProperties": False,
    },
}


class CallbackIn(Body):
    """What happens at each instant; ``data`` depends on ``type`` (the
    schema's ``oneOf``), as the server checks it (:class:`..jobs.Callback`:
    a refusal names ``callback.data.FIELD``)."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"properties": {"type": {"const": kind}, "data": data}}
                for kind, data in CALLBACK_DATA.items()
            ]
        }
    )

    type: Literal["rabbitmq", "http"]
    data: dict[str, Any] = Field(
        examples=[{"queue": "training.invitations.notifications", "payload": {"id": "42"}}]
    )


class JobIn(Body):
    """Seed 004's job: a key, the instants, a callback."""

    key: StrictStr | None = Field(default=None, description="if given, the key in the path")
    schedules: list[ZonedInstant] = Field(
        min_length=1,
        max_length=MAX_INSTANTS,
        description="at least one instant (DELETE /jobs/{key} cancels a job's instants)",
        examples=[["2020-12-24T14:00:00Z", "2020-12-25T14:00:00Z"]],
    )
    callback: CallbackIn
    max_delay: Duration | None = Field(default=None, description="how late an instant may run")
    priority: Priority | None = None


def _answer(state: ApiState, view: JobView) -> dict[str, Any]:
    body = view.to_dict()
    if view.cancelled_runs and state.revoke is not None:
        body["revoke_error"] = state.revoke(view.cancelled_runs)
    return body


@router.put(
    "/{key}",
    dependencies=[WRITE],
    response_model=JobOut,
    responses={201: {"model": JobOut, "description": "the job is new"}},
)
def put_job(state: State, key: JobKey, body: JobIn, response: Response) -> dict[str, Any]:
    """Create the job or replace its instants, atomically: instants given
    again are kept (one that already ran does not run again), new ones are
    added, and those left out that have not started are cancelled (one
    whose run has started goes on). 201 when the key was new."""
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
    """Cancel the instants that have not started; the job's history stays."""
    view = state.store.delete_job(key, now=state.clock())
    if view is None:
        raise NotFound(f"no job with key {key!r}")
    return _answer(state, view)
