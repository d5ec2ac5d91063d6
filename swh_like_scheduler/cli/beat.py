"""``swh scheduler import-beat``: a Celery app's ``beat_schedule`` as keyed tasks."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from ..config.sources import choose_database, mask_url
from ..domain.exceptions import InvalidInput
from .base import CliContext, emit_json, now, pass_cli
from .daemon import load_app as load_celery_app


def load_app(module: str | None, app_name: str | None) -> Any:
    """The Celery app of ``--app`` (as ``celery -A`` finds it), or an app
    configured from the configuration module ``module``; both are imported
    from the current directory first, as ``celery -A`` does."""
    from celery import Celery
    from celery.utils.imports import import_from_cwd

    if (module is None) == (app_name is None):
        raise click.UsageError("give a configuration MODULE or --app APP (one of them)")
    if app_name is not None:
        return load_celery_app(app_name)
    assert module is not None
    try:
        config = import_from_cwd(module)
    except Exception as exc:  # ImportError, or the module's own failure
        raise InvalidInput("MODULE", f"cannot import {module!r}: {exc}") from None
    app = Celery("swh_like_scheduler", set_as_current=False)
    app.config_from_object(config)
    return app


@click.command("import-beat")
@click.argument("module", required=False, metavar="[MODULE]")
@click.option(
    "--app",
    "-A",
    "app_name",
    metavar="APP",
    help="The Celery app, as celery -A takes it (proj.celery:app, or a module holding "
    "an app); instead of a configuration MODULE.",
)
@click.option(
    "--create-types",
    is_flag=True,
    help="Create the task type an entry needs when none runs its Celery task on its "
    "queue (named after the task).",
)
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option(
    "--prune",
    is_flag=True,
    help="Delete the tasks whose entry is gone (a task with a run open is disabled).",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="NAME",
    help="Leave the entry NAME out (repeatable); its task, if any, is kept as it is.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
@click.pass_context
def import_beat(
    ctx: click.Context,
    cli: CliContext,
    module: str | None,
    app_name: str | None,
    create_types: bool,
    dry_run: bool,
    prune: bool,
    exclude: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create or update one task per entry of a Celery beat_schedule.

    MODULE is a Celery configuration module (like celeryconfig) that holds
    beat_schedule and timezone; or give the app with --app. Each entry
    becomes the task with key 'beat:<entry name>', of the task type that
    runs its Celery task on the queue Celery routes it to. crontab() becomes
    a cron task in the app's timezone; schedule(run_every=...), a timedelta
    or a number of seconds a periodic task with that period and a cooldown
    of 90 % of it (about one run per period; the first one period after the
    import); solar() is refused. Importing again changes nothing unless an
    entry changed: its task is then updated in place. Exit code 1 when a
    changed task has a run open (import again once it ended).
    """
    app = load_app(module, app_name)
    database = choose_database(cli.settings, app=app, app_spec=app_name or module)
    if database.url != cli.settings.db_url:
        cli.settings = dataclasses.replace(
            cli.settings, db_url=database.url, db_is_default=False, db_source=database.source
        )
    schedule = app.conf.beat_schedule or {}
    unknown = sorted(set(exclude) - set(schedule))
    if unknown:
        raise InvalidInput("exclude", f"beat_schedule has no entry {unknown[0]!r}")
    from ..beat.importer import import_entries
    from ..beat.schedule import app_entries, entry_key

    entries = app_entries(app, exclude=exclude)
    report = import_entries(
        cli.store,
        entries,
        now=now(),
        create_types=create_types,
        prune=prune,
        dry_run=dry_run,
        keep={entry_key(name) for name in exclude},
    )
    if database.default:
        click.echo(
            "warning: nobody chose the database: it is the built-in default (give --db-url, "
            "SWH_SCHEDULER_DB_URL or the app's swh_scheduler_db_url setting)",
            err=True,
        )
    if as_json:
        emit_json({**report.to_dict(), "database": mask_url(database.url)})
    else:
        verb = "would write to" if dry_run else "writing to"
        click.echo(f"{verb} database {database.describe()}")
        for line in report.lines():
            click.echo(line, err=line.startswith("warning: "))
    if report.busy:
        ctx.exit(1)
