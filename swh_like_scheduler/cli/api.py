"""``swh scheduler rpc-serve``: the HTTP API (swh-scheduler's command name)."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable, Sequence

import click

from ..config.settings import ENV_PREFIX
from ..config.sources import Chosen, choose_database
from ..domain.exceptions import InvalidInput
from ..store.session import daemon_pool
from .base import CliContext, pass_cli
from .daemon import LOG_FORMAT, announce, option_source

#: the defaults of ``api.serving.Bounds``, spelled here so that ``--help``
#: loads no web framework (a test checks that they agree)
HEADER_TIMEOUT, BODY_TIMEOUT, KEEP_ALIVE_TIMEOUT, MAX_CONNECTIONS = 10.0, 30.0, 5, 4096
BODY_DEADLINE, BODY_MIN_RATE = 60.0, 65536
#: the defaults of ``api.ApiSettings``' health and console settings, and the
#: console session's longest life (``console.session``), spelled here likewise
HEALTH_STALE_AFTER, CLOCK_BOUND, CONSOLE_IDLE, CONSOLE_LIFETIME = 120.0, 2.0, 3600, 12 * 3600

logger = logging.getLogger(__name__)


def broker_hooks(
    broker_url: str,
) -> tuple[Callable[[], str | None], Callable[[Sequence[str]], str | None]]:
    """``(check, revoke)`` of the API over the Celery broker at ``broker_url``."""
    from ..broker.connection import connection_scope, error_text
    from ..broker.revoke import revoke_runs
    from ..plumbing.celery_factory import make_app

    app = make_app(broker_url=broker_url, load_workers=False)

    def check() -> str | None:
        try:
            with connection_scope(app, None):
                return None
        except Exception as exc:  # any transport error: the broker is out of reach
            return error_text(exc)

    def revoke(backend_ids: Sequence[str]) -> str | None:
        return revoke_runs(app, list(backend_ids))

    return check, revoke


@click.command("rpc-serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", "-p", default=5008, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--tokens",
    envvar=f"{ENV_PREFIX}_API_TOKENS",
    show_envvar=True,
    help="Comma-separated bearer tokens, SECRET:rw (read and write) or SECRET:ro "
    "(read only); default: api_tokens in the config file, else one generated "
    "read-write token printed at start.",
)
@click.option(
    "--open-reads/--no-open-reads",
    default=None,
    help="Let reads (GET) through without a token (default: api_open_reads in "
    "the config file, else no).",
)
@click.option(
    "--broker-url",
    envvar=f"{ENV_PREFIX}_BROKER_URL",
    show_envvar=True,
    help="Celery broker: checked by /health, revokes on cancel (default: "
    "broker_url in the config file; none: cancelled runs are refused at start).",
)
@click.option(
    "--count-every",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="The longest the stored census (the counts of /metrics, /conditions and the "
    "console) may get old before this server runs the census step itself, when no "
    "monitor keeps it fresher; sooner when counting is cheap. 0: no counts.",
)
@click.option(
    "--rate-limit",
    type=click.FloatRange(min=0),
    default=100.0,
    show_default=True,
    metavar="PER_SECOND",
    help="Requests per second each client (its token, else its address) may make, "
    "twice that at once; past it a 429 with Retry-After (0: no limit).",
)
@click.option(
    "--access-log/--no-access-log",
    default=False,
    help="Log each request: method, path, status, milliseconds, token number (never "
    "the secret) or address.",
)
@click.option(
    "--db-pool-size",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Database connections the server keeps and uses at most: requests "
    "beyond them wait for one (their statements are bounded: 30 s).",
)
@click.option(
    "--allowed-hosts",
    metavar="NAMES",
    help="Comma-separated host names the Host header of a request may give "
    "(scheduler.example.org, *.example.org; * for any); another is a 400. Required "
    "with a --host beyond loopback; on loopback, default: localhost, 127.0.0.1, ::1 "
    "and the --host address.",
)
@click.option(
    "--forwarded-allow-ips",
    metavar="ADDRESSES",
    help="Comma-separated addresses or networks of the reverse proxies whose "
    "X-Forwarded-For and X-Forwarded-Proto count (the client address of the rate "
    "limit and the access log); default: nobody's.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0.1),
    default=HEADER_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="A connection whose request headers are not complete this long after they "
    "began is closed.",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0.1),
    default=BODY_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="A connection whose request body stalls this long is closed.",
)
@click.option(
    "--body-deadline",
    type=click.FloatRange(min=0.1),
    default=BODY_DEADLINE,
    show_default=True,
    metavar="SECONDS",
    help="A request body not complete this long after its headers is cut (a 408, the "
    "connection closed), unless it has come at --body-min-rate and is not answered yet.",
)
@click.option(
    "--body-min-rate",
    type=click.IntRange(min=1),
    default=BODY_MIN_RATE,
    show_default=True,
    metavar="BYTES_PER_SECOND",
    help="The average rate a request body past --body-deadline must have come at to go "
    "on (a large import on a slow link).",
)
@click.option(
    "--keep-alive-timeout",
    type=click.IntRange(min=1),
    default=KEEP_ALIVE_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="An idle kept-alive connection is closed after this long.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=MAX_CONNECTIONS,
    show_default=True,
    help="Open connections at most (fewer when the open-file limit is lower); a new "
    "one past them gets a 503 and is closed.",
)
@click.option(
    "--max-connections-per-address",
    type=click.IntRange(min=1),
    default=None,
    show_default="a quarter of --max-connections",
    help="Open connections from one client address (an IPv6 client's /64) at most; a "
    "new one past them gets a 429 and is closed. The proxies of --forwarded-allow-ips "
    "have no cap.",
)
@click.option(
    "--health-stale-after",
    type=click.FloatRange(min=1),
    default=HEALTH_STALE_AFTER,
    show_default=True,
    metavar="SECONDS",
    help="/health is degraded when tasks wait overdue this long with no runner pass, "
    "runs stay open this long with no sign of life from their worker, or the oldest "
    "run waiting in a queue is late by this long.",
)
@click.option(
    "--clock-bound",
    type=click.FloatRange(min=0, min_open=True),
    default=CLOCK_BOUND,
    show_default=True,
    metavar="SECONDS",
    help="/health names, in clocks_off and its warnings, each runner, monitor, listener "
    "or worker whose clock is further than this from the database's.",
)
@click.option(
    "--console-idle",
    type=click.IntRange(1, CONSOLE_LIFETIME),
    default=CONSOLE_IDLE,
    show_default=True,
    metavar="SECONDS",
    help="A console session unused this long is over (the page's own live updates are "
    "no use); a session is over after 12 hours whatever its use.",
)
@click.option("--log-level", default="info", show_default=True)
@pass_cli
def rpc_serve(
    cli: CliContext,
    host: str,
    port: int,
    tokens: str | None,
    open_reads: bool | None,
    broker_url: str | None,
    count_every: float,
    rate_limit: float,
    access_log: bool,
    db_pool_size: int,
    allowed_hosts: str | None,
    forwarded_allow_ips: str | None,
    header_timeout: float,
    body_timeout: float,
    body_deadline: float,
    body_min_rate: int,
    keep_alive_timeout: int,
    max_connections: int,
    max_connections_per_address: int | None,
    health_stale_after: float,
    clock_bound: float,
    console_idle: int,
    log_level: str,
) -> None:
    """Serve the scheduler over HTTP: task types, tasks, runs, conditions,
    /health and /metrics, with an OpenAPI document at /openapi.json and
    interactive docs at /docs."""
    from ..api import ApiSettings, parse_tokens
    from ..api.serving import (
        Bounds,
        beyond_loopback,
        connections_within,
        forwarded_ips,
        loopback_hosts,
        raise_open_files,
        run,
    )
    from ..store.clock import DatabaseClock
    from ..web import create_app

    settings = cli.settings
    broker = broker_url or settings.broker_url
    chosen = None
    if broker_url:
        chosen = Chosen(broker_url, option_source("--broker-url", f"{ENV_PREFIX}_BROKER_URL"))
    elif broker:
        chosen = Chosen(broker, settings.broker_source or "the configuration file")
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    announce("rpc-serve", choose_database(settings), chosen)  # before anything else
    if chosen is None:
        logger.info("rpc-serve: no broker: cancelled runs are refused at start, not revoked")
    cli.daemon = True
    variable = f"{ENV_PREFIX}_API_TOKENS"
    if tokens is None and variable in os.environ:  # click reads an empty variable as unset
        raise InvalidInput(
            variable,
            "is set but empty: give SECRET:rw or SECRET:ro tokens, or unset it to have "
            "one generated",
        )
    hosts = _names(allowed_hosts, "allowed-hosts") if allowed_hosts is not None else ()
    if beyond_loopback(host) and not hosts:
        raise InvalidInput(
            "allowed-hosts",
            f"serving on {host}, beyond loopback, needs --allowed-hosts: the host names "
            "clients reach this server by (e.g. --allowed-hosts scheduler.example.org); "
            "requests naming another host are refused",
        )
    if not hosts:  # on loopback: its own names only (a rebound name gets nothing)
        hosts = loopback_hosts(host)
    if max_connections_per_address is not None and max_connections_per_address > max_connections:
        raise InvalidInput(
            "max-connections-per-address",
            f"{max_connections_per_address} is more than --max-connections "
            f"({max_connections}): one address could still take every connection",
        )
    forwarded = None
    if forwarded_allow_ips is not None:
        forwarded = forwarded_ips(forwarded_allow_ips.split(","), field="forwarded-allow-ips")
    entries = tokens if tokens is not None else settings.api_tokens
    field = "tokens" if tokens is not None else "api_tokens"
    parsed = parse_tokens(entries, field=field) if entries is not None else ()
    if not parsed:
        generated = secrets.token_urlsafe(24)
        parsed = parse_tokens([f"{generated}:rw"])
        click.echo(f"no --tokens, {variable} or api_tokens given: one token is generated", err=True)
        click.echo(f"API token (read-write, generated for this run): {generated}", err=True)
    open_files = raise_open_files()
    connections = connections_within(max_connections, open_files)
    if connections < max_connections:
        click.echo(
            f"warning: --max-connections {max_connections} is more than the open-file "
            f"limit ({open_files}) allows: at most {connections} connections",
            err=True,
        )
    if beyond_loopback(host):
        click.echo(
            f"warning: serving plain HTTP on {host}: tokens cross the network in clear "
            "text; put the API behind a TLS reverse proxy (docs/howto/http-api.md, 'Behind TLS')",
            err=True,
        )
    check, revoke = broker_hooks(broker) if broker else (None, None)
    api = ApiSettings(
        tokens=parsed,
        open_reads=settings.api_open_reads if open_reads is None else open_reads,
        broker_url=broker,
        count_every=count_every,
        reach=settings.callback_allow,
        rate_limit=rate_limit,
        access_log=access_log,
        allowed_hosts=hosts,
        health_stale_after=health_stale_after,
        clock_bound=clock_bound,
        console_idle=console_idle,
    )
    cli.pool = daemon_pool("api", api=db_pool_size)
    store = cli.scheduling_store("rpc-serve")
    # the database's clock, which decides (this host's may be off)
    clock = DatabaseClock(store, role="api").now
    app = create_app(store, api, clock=clock, broker_check=check, revoke=revoke)
    bounds = Bounds(
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        body_deadline=body_deadline,
        body_min_rate=body_min_rate,
        keep_alive_timeout=keep_alive_timeout,
        max_connections=connections,
        max_connections_per_address=(
            None
            if max_connections_per_address is None
            else min(max_connections_per_address, connections)
        ),
        # a proxy's connections are its clients': it caps them itself
        uncapped=tuple(forwarded or ()),
    )
    try:
        run(app, host=host, port=port, log_level=log_level, bounds=bounds, forwarded=forwarded)
    except SystemExit as exc:  # uvicorn exits when it cannot bind
        raise InvalidInput("port", f"cannot serve on {host}:{port}") from exc


def _names(text: str, field: str) -> tuple[str, ...]:
    """Comma-separated host names, each checked (no scheme, port or path)."""
    names = tuple(n.strip() for n in text.split(","))
    for number, name in enumerate(names, 1):
        rest = name[2:] if name.startswith("*.") else name
        if name != "*" and (not rest or any(c in rest for c in " */@?#:")):
            raise InvalidInput(
                field,
                f"entry {number} ({name!r}) is not a host name (scheduler.example.org, "
                "*.example.org, or * for any)",
            )
    return names
