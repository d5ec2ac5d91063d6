"""What the HTTP face is made of, below both the API's routes and the
console: how it serves (:class:`ApiSettings`) and what every route reaches
through ``request.app.state.api`` (:class:`ApiState`). The app itself is
assembled in :mod:`swh_like_scheduler.web`, above both."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..plumbing.reach import Reach
from ..store import SchedulerStore
from ..store.values import ScheduleHealth
from .auth import Token
from .condition_counts import Counts, Refreshed, RunCounts

#: where the documentation pages find their scripts and styles
DOCS_STATIC = "/static-offline-docs"
#: largest request body accepted (bytes)
MAX_BODY_BYTES = 2_000_000
#: largest form a console door takes (bytes): a CSRF token and a field or
#: two (logging out, acting on a task or a type), a login link's code
CONSOLE_BODY_BYTES = 1024
#: the doors that take more: a login (a token, and the console page to go
#: back to, its query included), a recount and a bulk action (the problem
#: list's filters, each at most 200 characters, percent-encoded)
CONSOLE_FORM_BYTES = {
    "/console/login": 8192,
    "/console/recount": 8192,
    "/console/bulk": 8192,
}
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
    #: /health warns of a runner's, monitor's, listener's or worker's clock
    #: further than this many seconds from the database's (measured in the
    #: last ten minutes)
    clock_bound: float = 2.0
    #: the host names a request's Host header may give (``*.example.org``,
    #: ``*``); empty: any (``rpc-serve`` on loopback gives its loopback names)
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
