"""The ``swh`` command, its ``scheduler`` group, shared options and error handling."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
from click.core import ParameterSource

from ..config.settings import ENV_PREFIX, FILE_SETTINGS, Settings, load_settings
from ..domain.exceptions import InvalidInput, SchedulerError
from ..domain.text import visible
from ..store.session import CLI_ROLE, PoolSize, daemon_pool
from .groups import Failed, Refused, SchedulerGroup, reported
from .tree import SCHEDULER

__all__ = ["Failed", "Refused", "SchedulerGroup", "reported"]

#: the commands that are daemons, and the role their database sessions take
#: (each is named ``swh-scheduler-<role>`` in ``pg_stat_activity``)
DAEMONS = {
    "start-runner": "runner",
    "schedule-recurrent": "runner",
    "journal-client": "listener",
    "start-listener": "listener",
    "start-monitor": "monitor",
    "rpc-serve": "api",
    "standalone": "standalone",
}

if TYPE_CHECKING:
    from ..index import RedisIndex
    from ..store import SchedulerStore, SQLAlchemyStore


@dataclass
class CliContext:
    """What every command needs, built lazily: no database is opened until a
    command asks for the store."""

    settings: Settings
    #: also create the schema in a given database that holds no table at all
    #: (``standalone``: the whole platform, its database included)
    create_empty: bool = False
    #: whose session bounds the database is opened with (:mod:`..store.session`)
    role: str = CLI_ROLE
    #: the pool of the database's engine (a daemon's: :func:`daemon_pool`)
    pool: PoolSize | None = None
    #: a daemon: it refuses a database without the scheduler's schema, the
    #: embedded default included (only ``db init`` and ``standalone`` make one)
    daemon: bool = False
    _store: SchedulerStore | None = field(default=None, repr=False)
    _index: RedisIndex | None = field(default=None, repr=False)

    @property
    def remote(self) -> bool:
        """The store is a server (``--db-url http://…``), not a database."""
        return self.settings.db_url.startswith(("http://", "https://"))

    @property
    def store(self) -> SchedulerStore:
        """The store: the database (keeping the Redis index in line when one
        is set, ``--index-url``), or the server ``--db-url`` names."""
        if self.remote:
            return self._opened()
        return self.scheduling_store("this command")

    def _opened(self) -> SchedulerStore:
        if self._store is None:
            if self.remote:
                from ..api.client import open_remote

                self._store = open_remote(self.settings.db_url, token=self.settings.api_token)
            else:
                self._store = self._open_sql()
        return self._store

    def sql_store(self, command: str) -> SQLAlchemyStore:
        """The database itself, for ``command`` (a daemon, the server...):
        opened with the session bounds of that daemon (:data:`DAEMONS`), or
        of a command when ``command`` is none."""
        if self.remote:
            raise InvalidInput(
                "db-url",
                f"{command} needs the database itself, not a server: give a "
                "postgresql:// or sqlite:// URL",
            )
        if self._store is None:
            self.role = DAEMONS.get(command, CLI_ROLE)
            if self.pool is None and self.role != CLI_ROLE:
                self.pool = daemon_pool(self.role)
        from ..store import SQLAlchemyStore

        store = self._opened()
        assert isinstance(store, SQLAlchemyStore)
        return store

    def scheduling_store(self, command: str) -> SchedulerStore:
        """The database for ``command``, keeping the Redis index in line
        with its writes when one is set (``--index-url``)."""
        store = self.sql_store(command)
        index = self.index()
        if index is None:
            return store
        from ..index import IndexedStore

        return cast("SchedulerStore", IndexedStore(store, index))

    def index(self) -> RedisIndex | None:
        """The Redis index (``--index-url``), or ``None`` when there is none."""
        if self.settings.index_url is None:
            return None
        if self._index is None:
            from ..index import RedisIndex

            self._index = RedisIndex.from_url(self.settings.index_url)
        return self._index

    def check_database_exists(self) -> None:
        """Refuse a SQLite ``--db-url`` whose file does not exist (opening it
        would create it, and its folders): only ``db init``/``db upgrade``,
        ``standalone`` and the embedded default create a database."""
        if self.create_empty or self.remote:
            return
        if self.settings.db_is_default and not self.daemon:
            return
        from ..store import missing_sqlite_file

        missing = missing_sqlite_file(self.settings.db_url)
        if missing is not None:
            what = ", the built-in default" if self.settings.db_is_default else ""
            raise InvalidInput(
                "db-url",
                f"no SQLite database at {missing}{what} (the file does not exist; check the "
                "path, or create it with `swh scheduler db init`)",
            )

    def _open_sql(self) -> SQLAlchemyStore:
        from ..store import SQLAlchemyStore, migrations

        self.check_database_exists()
        store = SQLAlchemyStore.from_url(
            self.settings.db_url,
            max_argument_bytes=self.settings.max_argument_bytes,
            role=self.role,
            pool=self.pool,
        )
        store.origin_schemes = self.settings.visits.origin_schemes
        store.disable_after_failures = self.settings.visits.disable_after_failures
        if self.settings.db_is_default and not self.daemon:
            # the embedded default is created (and kept current) on first use
            # by a command, or by standalone; a daemon refuses it empty
            if not migrations.is_current(store.engine):
                migrations.upgrade(store.engine)
        elif self.create_empty and migrations.is_empty(store.engine):
            migrations.upgrade(store.engine)
        else:
            migrations.check(store.engine)
        return store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        if self._index is not None:
            self._index.client.close()


def now() -> datetime:
    """The current instant; the only clock read of the command line."""
    return datetime.now(tz=UTC)


pass_cli = click.make_pass_decorator(CliContext)


@click.group(cls=SchedulerGroup, context_settings={"auto_envvar_prefix": "SWH"})
def swh() -> None:
    """Software Heritage-like command line."""


@swh.group(
    cls=SchedulerGroup, lazy=SCHEDULER, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.option(
    "--db-url",
    envvar=f"{ENV_PREFIX}_DB_URL",
    show_envvar=True,
    help="Database URL (postgresql://… or sqlite:///…), or the URL of a "
    "scheduler server (http://…, see rpc-serve). "
    "Default: a SQLite file in your data directory, created on first use.",
)
@click.option(
    "--api-token",
    envvar=f"{ENV_PREFIX}_API_TOKEN",
    show_envvar=True,
    help="Bearer token for a server --db-url (default: api_token in the config file).",
)
@click.option(
    "--config-file",
    "-C",
    envvar=f"{ENV_PREFIX}_CONFIG_FILE",
    show_envvar=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML file with a [scheduler] table of settings: "
    f"{', '.join(FILE_SETTINGS)} (flags and environment variables win). Default: "
    "config.toml in your configuration directory, when it exists.",
)
@click.option(
    "--max-argument-bytes",
    envvar=f"{ENV_PREFIX}_MAX_ARGUMENT_BYTES",
    show_envvar=True,
    type=click.IntRange(min=1),
    help="Refuse new tasks whose arguments take more bytes of JSON "
    "(default: 65536, or max_argument_bytes in the config file).",
)
@click.option(
    "--index-url",
    envvar=f"{ENV_PREFIX}_INDEX_URL",
    show_envvar=True,
    help="Redis URL of the optional index of waiting tasks (redis://host:port/db): "
    "runners find ready tasks there, the database stays the truth. Runners, the "
    "listener, the monitor and the server must all be given it (default: "
    "index_url in the config file; none).",
)
@click.option(
    "--callback-allow",
    envvar=f"{ENV_PREFIX}_CALLBACK_ALLOW",
    show_envvar=True,
    help="Networks and host names http callbacks may reach besides public addresses "
    "(comma-separated: 10.0.0.0/8,127.0.0.1,hooks.internal; default: callback_allow "
    "in the config file; none).",
)
@click.pass_context
def scheduler(
    ctx: click.Context,
    db_url: str | None,
    api_token: str | None,
    config_file: Path | None,
    max_argument_bytes: int | None,
    index_url: str | None,
    callback_allow: str | None,
) -> None:
    """Manage the scheduler: task types, tasks, runs and the database."""
    by_env = ctx.get_parameter_source("db_url") is ParameterSource.ENVIRONMENT
    try:
        settings = load_settings(
            db_url=db_url,
            db_source=f"{ENV_PREFIX}_DB_URL" if by_env else "--db-url",
            config_file=config_file,
            max_argument_bytes=max_argument_bytes,
            api_token=api_token,
            index_url=index_url,
            callback_allow=callback_allow,
        )
    except SchedulerError as error:
        raise reported(error) from None
    cli = CliContext(settings)
    ctx.obj = cli
    ctx.call_on_close(cli.close)


def emit_json(value: Any) -> None:
    """Print ``value`` as JSON: the data exactly (its escapes decode back to
    the characters stored, whatever they are)."""
    click.echo(json.dumps(value, indent=2, default=_json_default, sort_keys=True))


def say(*lines: str, err: bool = False) -> None:
    """Print lines for people, each with its invisible and reordering
    characters as escapes (:func:`..text.visible`): a key, a name or an
    error text can neither pass for another (a right-to-left override),
    break into a line of its own, nor send the terminal its controls."""
    click.echo("\n".join(visible(line) for line in lines), err=err)


def _json_default(value: Any) -> Any:
    from datetime import timedelta

    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``swh`` console script."""
    swh.main(args=argv, prog_name="swh")
