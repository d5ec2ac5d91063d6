"""``swh scheduler db …``: create and upgrade the database schema; its identity."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

import click

from .base import CliContext, emit_json, pass_cli

if TYPE_CHECKING:
    import sqlalchemy as sa


def _migrations() -> ModuleType:
    # SQLAlchemy and Alembic are loaded when a command runs, not for --help
    from ..store import migrations

    return migrations


def _engine_for(cli: CliContext, app_spec: str | None = None) -> sa.Engine:
    # a command's bounds (no statement timeout); a migration also sets none
    # for its transaction, whatever the URL says (migrations.upgrade)
    from ..store import make_engine

    if app_spec is not None:  # the database the app names, unless --db-url does
        from .daemon import connect_database

        connect_database(cli, app_spec)
    return make_engine(cli.settings.db_url, role="cli")


#: ``--app`` of the schema commands: the database the app names
app_option = click.option(
    "--app",
    "-A",
    "app_spec",
    envvar="SWH_SCHEDULER_APP",
    show_envvar=True,
    metavar="MODULE:APP",
    help="Your Celery app (as celery -A takes it): the database is its "
    "swh_scheduler_db_url setting, unless --db-url names one.",
)


@click.command("init")
@app_option
@pass_cli
def init(cli: CliContext, app_spec: str | None) -> None:
    """Create the schema in an empty database (a no-op on a current one)."""
    from ..store import SQLAlchemyStore

    migrations = _migrations()
    engine = _engine_for(cli, app_spec)
    try:
        before = migrations.current_revision(engine)
        if before is not None and before != migrations.head_revision():
            raise click.UsageError(
                f"the database is at revision {before}; use `swh scheduler db upgrade`"
            )
        migrations.upgrade(engine)
        # the installation's identity is written now (its first use)
        installation = SQLAlchemyStore(engine).installation_id()
    finally:
        engine.dispose()
    where = engine.url.render_as_string(hide_password=True)
    click.echo(f"Database {where} is at revision {migrations.head_revision()}")
    click.echo(f"Installation id: {installation}")


@click.command("upgrade")
@click.option("--revision", default="head", show_default=True, help="Target revision.")
@app_option
@pass_cli
def upgrade(cli: CliContext, revision: str, app_spec: str | None) -> None:
    """Upgrade the schema to the latest (or the given) revision."""
    from ..store import SQLAlchemyStore

    migrations = _migrations()
    engine = _engine_for(cli, app_spec)
    try:
        before = migrations.current_revision(engine)
        migrations.upgrade(engine, revision)
        after = migrations.current_revision(engine)
        if after == migrations.head_revision():
            # written now, by the operator's command, rather than by the
            # first daemon that asks for it
            SQLAlchemyStore(engine).installation_id()
    finally:
        engine.dispose()
    click.echo(f"Database upgraded from {before or 'empty'} to {after}")


@click.command("version")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def version(cli: CliContext, as_json: bool) -> None:
    """Print the schema revision of the database and the one this code needs."""
    cli.check_database_exists()
    migrations = _migrations()
    engine = _engine_for(cli)
    try:
        current = migrations.current_revision(engine)
    finally:
        engine.dispose()
    code = migrations.head_revision()
    if as_json:
        emit_json({"database": current, "code": code, "current": current == code})
        return
    click.echo(f"database: {current or 'empty'}; code: {code}")


@click.command("identity")
@click.option(
    "--new",
    "renew",
    is_flag=True,
    help="Give this database a new identity (a copy of another installation's "
    "database, e.g. a restored dump). Stop every daemon of the installation first.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def identity(cli: CliContext, renew: bool, as_json: bool) -> None:
    """Print the installation's id (stored in the database at `db init` or its
    first use) and the listener's default event queue, which is named after it."""
    from ..listener.names import event_queue_name
    from .base import now

    store = cli.sql_store("db identity")
    installation = store.new_installation_id(now=now()) if renew else store.installation_id()
    queue = event_queue_name(installation)
    if as_json:
        emit_json({"installation_id": installation, "event_queue": queue, "renewed": renew})
        return
    if renew:
        click.echo("New identity given; restart every daemon and worker of the installation.")
    click.echo(f"installation: {installation}")
    click.echo(f"event queue:  {queue}")
