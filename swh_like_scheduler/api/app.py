"""The HTTP API's application: ``create_app(store, settings)``.

The caller owns the store (and closes it); nothing here reads the
environment. Errors have one shape: 422 ``{"detail": [{"loc", "msg",
"type"}]}`` naming the field for bad input (pydantic's and the scheduler's
own :class:`InvalidInput` alike), ``{"detail": "..."}`` for the others (401,
403, 404, 409, 413, 503). A store error is a 503 with its one-line cause,
never a traceback."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi_offline import FastAPIOffline

from ..exceptions import Conflict, InvalidInput, NotFound, SchedulerError, StoreError
from ..quietlog import QuietLog
from ..reach import Reach
from ..store import SchedulerStore
from ..store.values import ScheduleHealth
from .auth import Token
from .condition_counts import Counts, Refreshed, RunCounts, activity, run_counts, table_counts
from .edge import HostCheck, SecurityHeaders
from .gate import Gate
from .limits import BodyLimit

logger = logging.getLogger(__name__)
#: a database outage fails every request alike: one line a minute per kind
_failures = QuietLog(logger, logging.ERROR)

#: where the documentation pages find their scripts and styles
DOCS_STATIC = "/static-offline-docs"
#: largest request body accepted (bytes)
MAX_BODY_BYTES = 2_000_000
#: largest form the console takes (a login, an action)
CONSOLE_BODY_BYTES = 16_000
#: largest body of a remote store's call that writes (an import of many
#: tasks is one call); a read's is :data:`MAX_BODY_BYTES`
MAX_RPC_BODY_BYTES = 256_000_000


def utcnow() -> datetime:
    return datetime.now(tz=UTC)


@dataclass(frozen=True)
class ApiSettings:
    """How the API serves."""

    tokens: tuple[Token, ...] = ()
    #: reads need no token
    open_reads: bool = False
    max_body_bytes: int = MAX_BODY_BYTES
    max_rpc_body_bytes: int = MAX_RPC_BODY_BYTES
    #: the Celery broker (revokes on cancel, reachability in /health)
    broker_url: str | None = None
    #: /metrics counts the tasks per status and condition again (a read of
    #: the whole task table, in the background) when its counts are older
    #: than this many seconds; 0: never
    count_every: float = 300.0
    #: /metrics counts the open runs again (in the background) when its
    #: count is older than this many seconds
    runs_every: float = 15.0
    #: requests per second each client (token, else address) may make; 0: no limit
    rate_limit: float = 0.0
    #: one log line per request (method, path, status, duration, client)
    access_log: bool = False
    #: where http callbacks may go besides public addresses
    reach: Reach = field(default_factory=Reach)
    #: /health is degraded when work waits this many seconds with no runner
    #: pass, or runs stay open that long with no worker sign of life
    health_stale_after: float = 120.0
    #: the host names a request's Host header may give (``*.example.org``,
    #: ``*``); empty: any (a server on loopback)
    allowed_hosts: tuple[str, ...] = ()
    #: a console session unused this many seconds is over (at most its
    #: 12-hour lifetime)
    console_idle: int = 3600


@dataclass
class ApiState:
    """What every route reaches through ``request.app.state.api``."""

    store: SchedulerStore
    settings: ApiSettings
    clock: Callable[[], datetime]
    #: ``None`` when the broker answers, else why not (``None`` as a
    #: whole: no broker configured)
    broker_check: Callable[[], str | None] | None = None
    #: revokes dispatched runs by backend id (``None`` when it worked, else
    #: why not); ``None`` as a whole: cancelled runs are refused at start only
    revoke: Callable[[Sequence[str]], str | None] | None = None
    #: the whole-table counts /metrics reports (``None``: not counted)
    table_counts: Refreshed[Counts] | None = None
    #: the open runs /metrics reports, counted in the background
    run_counts: Refreshed[RunCounts] | None = None
    #: the console's runs in flight, dispatched and ended, counted in the background
    activity: Refreshed[ScheduleHealth] | None = None


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


def _scheduler_error(request: Request, exc: Exception) -> JSONResponse:
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


def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    return JSONResponse(status_code=422, content={"detail": errors})


def create_app(
    store: SchedulerStore,
    settings: ApiSettings | None = None,
    *,
    clock: Callable[[], datetime] = utcnow,
    broker_check: Callable[[], str | None] | None = None,
    revoke: Callable[[Sequence[str]], str | None] | None = None,
) -> FastAPI:
    """The ASGI application serving ``store``."""
    from ..reachguard import guarded
    from . import (
        routes_bulk,
        routes_edit,
        routes_jobs,
        routes_observe,
        routes_rpc,
        routes_tasks,
        routes_types,
    )
    from .deps import no_nul_parameters
    from .schemas import ERROR_RESPONSES

    settings = settings or ApiSettings()
    # every door that writes tasks or jobs (REST, /rpc, the console) checks
    # callback URLs against the same rule
    store = cast(SchedulerStore, guarded(store, settings.reach))
    # the documentation pages with their scripts and styles from the
    # package (fastapi-offline): /docs works on a host with no way out
    app = FastAPIOffline(
        static_url=DOCS_STATIC,
        dependencies=[Depends(no_nul_parameters)],
        responses=ERROR_RESPONSES,
        title="swh_like_scheduler",
        summary="Recurring and one-shot Celery tasks kept fresh by deadline",
        version="1",
    )
    every = settings.count_every
    counts = table_counts(store, clock, every) if every > 0 else None
    runs = run_counts(store, clock, settings.runs_every)
    app.state.api = ApiState(
        store,
        settings,
        clock,
        broker_check,
        revoke,
        counts,
        runs,
        activity(store, clock, settings.runs_every),
    )
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(SchedulerError, _scheduler_error)
    # /tasks/bulk/... before /tasks/{task_id}/...
    for module in (
        routes_types,
        routes_bulk,
        routes_tasks,
        routes_edit,
        routes_jobs,
        routes_observe,
        routes_rpc,
    ):
        app.include_router(module.router)

    from ..console import mount_console

    mount_console(app, settings.tokens, idle=settings.console_idle)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        """The console (its pages link the API's documentation)."""
        return RedirectResponse("/console/", status_code=303)

    app.add_middleware(
        BodyLimit,
        limit=settings.max_body_bytes,
        larger={"/rpc/": settings.max_rpc_body_bytes, "/console/": CONSOLE_BODY_BYTES},
        # a store read takes ids and a filter: the plain limit, not an import's
        exact={f"/rpc/{name}": settings.max_body_bytes for name in routes_rpc.READ_METHODS},
    )
    # the token is checked before the body limit reads anything
    app.add_middleware(
        Gate,
        tokens=settings.tokens,
        open_reads=settings.open_reads,
        rpc_reads=routes_rpc.READ_METHODS,
        rate=settings.rate_limit,
        access_log=settings.access_log,
    )
    if settings.allowed_hosts:  # another host's request gets nothing
        app.add_middleware(HostCheck, allowed=settings.allowed_hosts)
    # outermost: every answer has the safe headers, refusals and errors included
    app.add_middleware(
        SecurityHeaders,
        routes=lambda: app.router.routes,
        cacheable=(DOCS_STATIC + "/", "/console/static/"),
    )
    return app
