"""The API's errors, in one shape: 422 ``{"detail": [{"loc", "msg",
"type"}]}`` naming the field for bad input (pydantic's and the scheduler's
own :class:`InvalidInput` alike), ``{"detail": "..."}`` for the others (401,
403, 404, 409, 413, 503). A store error is a 503 with its one-line cause,
never a traceback."""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ..domain.exceptions import Conflict, InvalidInput, NotFound, StoreError
from ..plumbing.quietlog import QuietLog

logger = logging.getLogger(__name__)
#: a database outage fails every request alike: one line a minute per kind
_failures = QuietLog(logger, logging.ERROR)


def field_error(loc: list[str | int], message: str, kind: str = "value_error") -> JSONResponse:
    return JSONResponse(
        status_code=422, content={"detail": [{"loc": loc, "msg": message, "type": kind}]}
    )


def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InvalidInput)
    where: list[str | int] = list(getattr(request.state, "error_prefix", ["body"]))
    # a dotted field (``callback.data.queue``, ``schedules.2``) is a path
    path = [int(p) if p.isdigit() else p for p in exc.field.split(".")]
    return field_error([*where, *path], exc.message)


def scheduler_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, Conflict):
        return JSONResponse(status_code=409, content={"detail": str(exc)})
    if isinstance(exc, NotFound):
        return JSONResponse(status_code=404, content={"detail": str(exc)})
    if isinstance(exc, InvalidInput):
        return _invalid(request, exc)
    if isinstance(exc, StoreError):
        _failures.log("%s %s: %s", request.method, request.url.path, exc, key=type(exc).__name__)
        return JSONResponse(status_code=503, content={"detail": str(exc)})
    _failures.log("%s %s: %s", request.method, request.url.path, exc, key=type(exc).__name__)
    return JSONResponse(status_code=500, content={"detail": str(exc)})


def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    return JSONResponse(status_code=422, content={"detail": errors})
