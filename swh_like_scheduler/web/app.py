"""``create_app(store, settings)``: the API and the console on one app.

The caller owns the store (and closes it); nothing here reads the
environment. Errors have the API's one shape (:mod:`..api.errors`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import cast

from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi_offline import FastAPIOffline

from ..api import (
    routes_bulk,
    routes_edit,
    routes_forecast,
    routes_jobs,
    routes_observe,
    routes_rpc,
    routes_swh,
    routes_tasks,
    routes_types,
)
from ..api.condition_counts import activity, run_counts, table_counts
from ..api.deps import no_nul_parameters
from ..api.edge import HostCheck, SecurityHeaders
from ..api.errors import scheduler_error, validation_error
from ..api.gate import Gate
from ..api.limits import BodyLimit
from ..api.schemas import ERROR_RESPONSES
from ..api.state import (
    CONSOLE_BODY_BYTES,
    CONSOLE_FORM_BYTES,
    DOCS_STATIC,
    ApiSettings,
    ApiState,
    utcnow,
)
from ..api.swh_refusals import SwhRefusals
from ..console import mount_console
from ..domain.exceptions import SchedulerError
from ..store import SchedulerStore
from .reachguard import guarded


def create_app(
    store: SchedulerStore,
    settings: ApiSettings | None = None,
    *,
    clock: Callable[[], datetime] = utcnow,
    broker_check: Callable[[], str | None] | None = None,
    revoke: Callable[[Sequence[str]], str | None] | None = None,
) -> FastAPI:
    """The ASGI application serving ``store``."""
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
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(SchedulerError, scheduler_error)
    # /tasks/bulk/... before /tasks/{task_id}/...
    for module in (
        routes_types,
        routes_bulk,
        routes_tasks,
        routes_edit,
        routes_jobs,
        routes_observe,
        routes_forecast,
        routes_rpc,
        routes_swh,
    ):
        app.include_router(module.router)

    mount_console(app, settings.tokens, idle=settings.console_idle)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        """The console (its pages link the API's documentation)."""
        return RedirectResponse("/console/", status_code=303)

    app.add_middleware(
        BodyLimit,
        limit=settings.max_body_bytes,
        # the large limit for a POST of a store call that writes (an import is
        # one call) only: a read takes ids and a filter, a GET no body at all
        posts={
            **{f"/rpc/{name}": settings.max_rpc_body_bytes for name in routes_rpc.WRITE_METHODS},
            # and the reference's writes under /swh/ (a lister records a page of origins)
            **{f"/swh/{path}": settings.max_rpc_body_bytes for path in routes_swh.WRITE_PATHS},
        },
        exact=CONSOLE_FORM_BYTES,
        prefixes={"/console/": CONSOLE_BODY_BYTES},
    )
    # the token is checked before the body limit reads anything
    app.add_middleware(
        Gate,
        tokens=settings.tokens,
        open_reads=settings.open_reads,
        rpc_reads=routes_rpc.READ_METHODS,
        read_posts=[f"/swh/{path}" for path in routes_swh.READ_PATHS],
        rate=settings.rate_limit,
        access_log=settings.access_log,
    )
    if settings.allowed_hosts:  # another host's request gets nothing
        app.add_middleware(HostCheck, allowed=settings.allowed_hosts)
    # the refusals above, under /swh/, as swh-scheduler's client reads them
    app.add_middleware(SwhRefusals)
    # outermost: every answer has the safe headers, refusals and errors included
    app.add_middleware(
        SecurityHeaders,
        routes=lambda: app.router.routes,
        cacheable=(DOCS_STATIC + "/", "/console/static/"),
    )
    return app
