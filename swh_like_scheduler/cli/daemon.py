"""What every command that talks to a broker shares: ``--app`` and
``--broker-url``, the Celery app they give, and a daemon's first log line.

``--app MODULE:APP`` takes a Celery app of your own, as ``celery -A`` does
(imported from the current directory first): its broker, result backend,
routes and time zone are then the configuration, and its
``swh_scheduler_db_url`` setting names the database unless ``--db-url``
does (:mod:`..config.sources` has the order). The first line a daemon logs
names the database and the broker it uses and where each came from; a
built-in default nobody chose is said as a warning.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from ..config.settings import ENV_PREFIX
from ..config.sources import Chosen, choose_broker, choose_database, first_line
from ..domain.exceptions import InvalidInput
from .base import CliContext

if TYPE_CHECKING:
    from celery import Celery

logger = logging.getLogger("swh_like_scheduler.daemon")
F = TypeVar("F", bound=Callable[..., Any])
LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def app_options(*, broker_help: str = "Celery broker") -> Callable[[F], F]:
    """``--app`` and ``--broker-url``, for a command that talks to a broker."""

    def decorate(command: F) -> F:
        command = click.option(
            "--broker-url",
            envvar=f"{ENV_PREFIX}_BROKER_URL",
            show_envvar=True,
            help=f"{broker_help} (default: the --app's broker, else broker_url in the "
            "config file, else redis://127.0.0.1:6379/0, with a warning).",
        )(command)
        return click.option(
            "--app",
            "-A",
            "app_spec",
            envvar=f"{ENV_PREFIX}_APP",
            show_envvar=True,
            metavar="MODULE:APP",
            help="Your Celery app, as celery -A takes it (proj.celery:app), imported from "
            "the current directory: its broker, result backend, routes and time zone are "
            "used, and its swh_scheduler_db_url setting names the database (unless "
            "--db-url does).",
        )(command)

    return decorate


def load_app(spec: str) -> Any:
    """The Celery app ``spec`` names (``proj.celery:app``, or a module
    holding one), found as ``celery -A`` finds it."""
    from celery.app.utils import find_app

    try:
        return find_app(spec)
    except Exception as exc:  # ImportError, AttributeError, Celery's own
        raise InvalidInput("app", f"cannot load the Celery app {spec!r}: {exc}") from None


def option_source(name: str, variable: str) -> str:
    """How click got option ``name`` of the running command: the flag, or
    the environment variable."""
    context = click.get_current_context(silent=True)
    by_env = (
        context is not None
        and context.get_parameter_source(name.lstrip("-").replace("-", "_"))
        is ParameterSource.ENVIRONMENT
    )
    return variable if by_env else name


@dataclass
class Connected:
    """The app a command uses, and the database and broker it names."""

    app: Celery
    database: Chosen
    broker: Chosen
    #: the --app given, if any
    app_spec: str | None = None

    @property
    def own_app(self) -> bool:
        return self.app_spec is not None


def connect(cli: CliContext, *, app_spec: str | None, broker_url: str | None) -> Connected:
    """The Celery app of a command (``--app``'s, else the platform's with
    the broker chosen), with the database it names put in ``cli``'s
    settings before the store is opened."""
    from ..plumbing.celery_factory import make_app

    user_app = load_app(app_spec) if app_spec else None
    database = choose_database(cli.settings, app=user_app, app_spec=app_spec)
    if database.url != cli.settings.db_url:
        cli.settings = dataclasses.replace(
            cli.settings, db_url=database.url, db_is_default=False, db_source=database.source
        )
    # the platform's settings, with the environment's result backend (the
    # listener's catch-up reads it) and lease period; the broker is chosen below
    base = make_app(load_workers=False, environ=os.environ)
    broker = choose_broker(
        cli.settings,
        flag=broker_url,
        flag_source=option_source("--broker-url", f"{ENV_PREFIX}_BROKER_URL")
        if broker_url
        else None,
        app=user_app,
        app_spec=app_spec,
        built_in=str(base.conf.get("broker_url")),
        celery_env=os.environ.get("CELERY_BROKER_URL"),
    )
    # Celery reads CELERY_BROKER_URL before any app's setting: the broker
    # chosen must be the one it connects to
    if os.environ.get("CELERY_BROKER_URL") not in (None, broker.url):
        logger.warning("CELERY_BROKER_URL is left aside: the broker is %s", broker.describe())
        os.environ.pop("CELERY_BROKER_URL")
    if user_app is None:
        base.conf.broker_url = broker.url
        return Connected(base, database, broker)
    if not broker.default:
        user_app.conf.broker_url = broker.url
    return Connected(user_app, database, broker, app_spec)


def connect_database(cli: CliContext, app_spec: str) -> Chosen:
    """The database the app ``app_spec`` names, unless ``--db-url`` does,
    put in ``cli``'s settings (a command that uses no broker)."""
    database = choose_database(cli.settings, app=load_app(app_spec), app_spec=app_spec)
    if database.url != cli.settings.db_url:
        cli.settings = dataclasses.replace(
            cli.settings, db_url=database.url, db_is_default=False, db_source=database.source
        )
    return database


def announce(command: str, database: Chosen, broker: Chosen | None) -> None:
    """Log a daemon's first line (:func:`..config.sources.first_line`)."""
    warn, text = first_line(command, database, broker)
    logger.log(logging.WARNING if warn else logging.INFO, "%s", text)


def start_daemon(
    cli: CliContext,
    command: str,
    *,
    app_spec: str | None,
    broker_url: str | None,
    level: int = logging.INFO,
) -> Connected:
    """Logging set up, the app and database chosen, the first line logged
    (before anything else), and the daemon's store bounds taken: the store
    it then opens refuses a database without the scheduler's schema."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    connected = connect(cli, app_spec=app_spec, broker_url=broker_url)
    announce(command, connected.database, connected.broker)
    cli.daemon = True
    return connected


def metrics_options(command: F) -> F:
    """``--metrics-port`` and ``--metrics-host``: Prometheus metrics of a
    daemon (:func:`serve_metrics`)."""
    command = click.option(
        "--metrics-host",
        default="0.0.0.0",
        show_default=True,
        metavar="ADDRESS",
        help="The address --metrics-port listens on: 127.0.0.1 for this host only, "
        ":: for every IPv6 and IPv4 interface.",
    )(command)
    return click.option(
        "--metrics-port",
        type=click.IntRange(1, 65535),
        help="Serve Prometheus metrics on this port (no token: let only your Prometheus reach it).",
    )(command)


def serve_metrics(port: int | None, host: str) -> None:
    """Serve this process's Prometheus metrics on ``host``:``port`` in a
    thread of their own (nothing when ``port`` is ``None``); a port taken or
    an address this host does not have is a clear error, not a traceback."""
    if port is None:
        return
    from prometheus_client import start_http_server

    try:
        start_http_server(port, addr=host)
    except OSError as error:  # the port taken, or no such address here
        field = "metrics-port" if error.errno == errno.EADDRINUSE else "metrics-host"
        raise InvalidInput(
            field, f"cannot serve metrics on {host}:{port}: {error.strerror or error}"
        ) from error
    logger.info("metrics served on %s:%d", host, port)


def database_only(cli: CliContext, command: str, *, level: int = logging.INFO) -> Chosen:
    """As :func:`start_daemon` for a daemon that uses no Celery broker."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    database = choose_database(cli.settings)
    announce(command, database, None)
    cli.daemon = True
    return database
