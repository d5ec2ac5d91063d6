"""``POST /swh/<endpoint>``: swh-scheduler's own RPC protocol, so that its
client (``swh.scheduler.get_scheduler("remote", url=".../swh/")``) drives
this scheduler as it drives the reference's server.

One endpoint per method of the reference's ``SchedulerInterface``, at its
path (``lister/get_or_create``, ``origins/grab_next``...), the arguments
by name in a msgpack body, the answer in msgpack (:mod:`.swh_codec`), the
model objects as the reference's (:mod:`.swh_models`). Reads need a read
token, writes the read-write one (the bearer token of the client's session
headers), as on ``/rpc``; a read's sizing arguments have ``/rpc``'s caps
(:mod:`.rpc_caps`). An error travels as the reference's exception:
``StaleData`` for a stale ``update_lister``, ``UnknownPolicy`` for a policy
this scheduler does not have, ``SchedulerException`` for anything else,
with a 4xx for the caller's mistakes; the methods that mean nothing here
(those that hand tasks and runs to the reference's own runner) answer a
``SchedulerException`` saying why, never a 404.

The endpoints themselves are in :mod:`.swh_methods`.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from ..domain.exceptions import (
    Conflict,
    InvalidInput,
    NotFound,
    SchedulerError,
    StaleUpdate,
    StoreUnavailable,
)
from . import swh_codec
from .state import ApiState
from .swh_methods import ENDPOINTS, READ_PATHS, UNSERVED, WRITE_PATHS, UnknownPolicy

logger = logging.getLogger(__name__)
router = APIRouter(prefix="/swh", tags=["swh-scheduler's client"])
MSGPACK = "application/x-msgpack"
__all__ = ["READ_PATHS", "WRITE_PATHS", "router"]


def answer(value: Any, status: int = 200) -> Response:
    """``value`` in msgpack; without msgpack installed, the refusal in JSON
    (the reference's client reads both)."""
    if not swh_codec.AVAILABLE:
        refusal = swh_codec.RemoteError(
            "SchedulerException",
            "this server cannot speak the reference's protocol: msgpack is not installed "
            "(pip install 'swh-like-scheduler[swh-rpc]')",
        )
        return JSONResponse(refusal.as_map(), status_code=501)
    return Response(swh_codec.dumps(value), status_code=status, media_type=MSGPACK)


def refusal(status: int, message: str, kind: str = "SchedulerException") -> Response:
    return answer(swh_codec.RemoteError(kind, message), status)


def error_answer(error: SchedulerError) -> Response:
    """A scheduler error as the reference's exception, with its status: never
    404, which the reference's client reads as a missing endpoint."""
    if isinstance(error, StaleUpdate):
        # the reference's words first (its own tests look for them), then ours
        return refusal(409, f"Stale data; state not updated: {error}", "StaleData")
    if isinstance(error, UnknownPolicy):
        return refusal(422, str(error), "UnknownPolicy")
    if isinstance(error, InvalidInput):
        return refusal(422, str(error))
    if isinstance(error, Conflict):
        return refusal(409, str(error))
    if isinstance(error, NotFound):
        return refusal(400, str(error))
    if isinstance(error, StoreUnavailable):
        # the client retries a 503 (swh-core's transient errors)
        return refusal(503, str(error))
    logger.error("swh rpc: %s", error)
    return refusal(500, str(error))


# not in the OpenAPI document: its bodies and answers are msgpack, one method
# per path of the reference's interface, not a JSON operation (the HTTP
# page documents it, and the reference's client is its schema)
@router.post("/{endpoint:path}", include_in_schema=False)
async def call(request: Request, endpoint: str) -> Response:
    """Call the reference's method served at ``endpoint`` with the
    arguments of the msgpack body (a map by name)."""
    state: ApiState = request.app.state.api
    served = ENDPOINTS.get(endpoint)
    if served is None:
        why = UNSERVED.get(endpoint)
        if why is not None:
            return refusal(400, f"{why[0]} is not served by swh_like_scheduler: {why[1]}")
        return refusal(400, f"{endpoint!r} is no method of swh-scheduler's SchedulerInterface")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if body and kind != MSGPACK:
        return refusal(415, f"the body is {kind or 'untyped'}: send {MSGPACK}")
    try:
        arguments = swh_codec.loads(body) if body else {}
        if not isinstance(arguments, dict):
            raise InvalidInput("body", "is a map of the method's arguments by name")
        result = await run_in_threadpool(served.call, state, arguments)
    except SchedulerError as error:
        return error_answer(error)
    except Exception:
        logger.exception("swh rpc %s failed", endpoint)
        return refusal(500, f"{served.method} failed on the server (its log says why)")
    return answer(result)
