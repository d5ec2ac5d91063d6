"""``swh scheduler task …``: create, import, list and act on tasks."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Container, Iterable
from datetime import UTC, tzinfo
from pathlib import Path
from typing import IO, Any

import click

from ..domain.exceptions import InvalidInput, NotFound, UnknownTaskType
from ..domain.model import CatchUp, Priority, ScheduleKind, Task
from ..domain.text import plural
from ..domain.validation import parse_datetime
from ..domain.validation import zone as parse_zone
from ..health import conditions
from ..intake.builders import task_from_input
from ..intake.importer import FORMATS, guess_format, read_rows, tasks_from_rows
from . import render
from .arguments import checked_arguments, no_check_args_option, task_checker
from .base import CliContext, emit_json, now, pass_cli, say
from .filters import type_option

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def show_tasks(tasks: list[Task], as_json: bool, heading: str, zone: tzinfo = UTC) -> None:
    """The tasks as JSON, or a block of lines each, their times in ``zone``."""
    if as_json:
        emit_json([render.task_json(t) for t in tasks])
        return
    say(heading)
    current = now()
    with render.one_clock(zone):
        say(render.zone_line(zone))
        for item in tasks:
            say("", *render.task_lines(item, current))


def _literal(text: str) -> Any:
    """A JSON literal (``3``, ``true``, ``[1, 2]``) as such; anything else as a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def split_arguments(arguments: tuple[str, ...]) -> tuple[list[Any], dict[str, Any]]:
    """``key=value`` items are keyword arguments, the others positional; values
    that read as JSON (numbers, booleans, lists...) are passed as such."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for item in arguments:
        name, sep, value = item.partition("=")
        if sep and name.isidentifier():
            kwargs[name] = _literal(value)
        else:
            args.append(_literal(item))
    return args, kwargs


@click.command("add")
@click.argument("type_name", metavar="TYPE")
@click.argument("arguments", nargs=-1, metavar="[ARG | KEY=VALUE]...")
@click.option(
    "--policy",
    "-p",
    type=click.Choice(["recurring", "oneshot"]),
    default="recurring",
    show_default=True,
)
@click.option(
    "--kind",
    type=click.Choice([k.value for k in ScheduleKind]),
    help="Schedule kind (default: from the options given; recurring means adaptive).",
)
@click.option("--priority", "-P", type=click.Choice([p.value for p in Priority]))
@click.option("--next-run", "-n", help="Its earliest start (ISO 8601, default now).")
@click.option("--interval", "-i", help="Adaptive interval (default: the type's).")
@click.option(
    "--period",
    help="Periodic: longest acceptable staleness; an idle platform runs the task about "
    "once per period.",
)
@click.option(
    "--cooldown",
    help="Periodic: pause after a good run before the next may start (default: 90% of "
    "the period less twice the run time, --expected-duration or the measured average "
    "whichever is longer, following it at each good run; 0: as often as capacity allows).",
)
@click.option("--cron", help="Cron expression, read in --tz.")
@click.option("--cron-max-duration", help="Cron: time allowed after each cron instant.")
@click.option("--max-delay", help="One-shot: allowed lateness.")
@click.option(
    "--tz",
    default="UTC",
    show_default=True,
    help="IANA time zone of the task (its cron, its blackouts) and of the times printed.",
)
@click.option(
    "--blackout",
    "blackouts",
    multiple=True,
    metavar="HH:MM-HH:MM",
    help="Local window in which it must not run (repeatable).",
)
@click.option("--dont-run-on", "nodes", multiple=True, metavar="NODE", help="Banned node.")
@click.option("--key", help="Client key: makes creation idempotent.")
@click.option("--expected-duration", help="Override of the measured average duration.")
@click.option("--max-expected-duration", help="Longer runs are logged.")
@click.option("--max-allowed-duration", help="Longer runs are terminated.")
@no_check_args_option
@click.option(
    "--catch-up",
    type=click.Choice([c.value for c in CatchUp]),
    help="Missed firings: latest (run once, late) or skip (default: the type's).",
)
@click.option("--catch-up-grace", help="How late a firing may run with skip (default: the type's).")
@json_option
@pass_cli
def add(
    cli: CliContext,
    type_name: str,
    arguments: tuple[str, ...],
    blackouts: tuple[str, ...],
    nodes: tuple[str, ...],
    no_check_args: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Create one task of type TYPE.

    The arguments are checked against the signature of the type's Celery
    task when its worker package is installed here (a warning says when it
    is not), and a positional ARG that names a parameter (`duration` for
    `duration=0`) is refused; --no-check-args skips the check."""
    args, kwargs = split_arguments(arguments)
    values: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    values.update(args=args, kwargs=kwargs, type=type_name)
    if "key" in values and not values["key"].strip():
        raise InvalidInput("key", "is empty: give a key, or leave --key out")
    if blackouts:
        values["blackout_periods"] = [_window(b) for b in blackouts]
    if nodes:
        values["dont_run_on_nodes"] = list(nodes)
    task_type = cli.store.get_task_type(type_name)
    if task_type is None:
        raise UnknownTaskType(type_name)
    checked_arguments(task_type, args, kwargs, check=not no_check_args)
    current = now()
    reach = cli.settings.callback_allow
    task = task_from_input(values, task_type, now=current, reach=reach)
    created = cli.store.create_tasks([task], now=current)
    existed = created[0].created_at is not None and created[0].created_at < current
    heading = f"Task {created[0].id} already existed" if existed else "Created 1 task"
    show_tasks(created, as_json, heading, zone=parse_zone("tz", task.tz))


def _window(text: str) -> dict[str, str]:
    start, sep, end = text.partition("-")
    if not sep:
        raise InvalidInput("blackout", f"{text!r} is not a window like 23:00-01:30")
    return {"start": start.strip(), "end": end.strip()}


@click.command("schedule")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="Input format (default: from the file name; '-' is CSV).",
)
@click.option("--columns", "-c", help="Comma-separated columns of a CSV without header.")
@click.option("--delimiter", "-d", default=",", show_default=True)
@type_option("Type of rows that name none.", dest="default_type")
@click.option("--batch-size", default=1000, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@no_check_args_option
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON (no progress bar).")
@pass_cli
def schedule(
    cli: CliContext,
    file: IO[str],
    fmt: str | None,
    columns: str | None,
    delimiter: str,
    default_type: str | None,
    batch_size: int,
    quiet: bool,
    no_check_args: bool,
    as_json: bool,
) -> None:
    """Create tasks from FILE (CSV with a header row, or JSON lines; '-' reads stdin).

    Columns/keys: type, args and kwargs (JSON), key, policy, kind, next_run,
    interval, period, cooldown, cron, cron_max_duration, max_delay, priority,
    tz, blackout_periods (JSON), dont_run_on_nodes, max_expected_duration,
    max_allowed_duration, expected_duration. The file is imported in one
    transaction: a bad line (reported with its number) writes nothing.
    Arguments that do not fit the signature of their type's Celery task
    make a bad line, when its worker package is installed here
    (--no-check-args: not checked). A periodic task without a cooldown gets
    the default one (see task add).
    """
    quiet = quiet or as_json
    name = getattr(file, "name", "-")
    fmt = fmt or guess_format(name)
    column_list = [c.strip() for c in columns.split(",")] if columns else None
    started, current = time.monotonic(), now()
    rows = read_rows(file, fmt, columns=column_list, delimiter=delimiter)
    tasks = tasks_from_rows(
        rows,
        cli.store.get_task_type,
        now=current,
        default_type=default_type,
        max_argument_bytes=cli.settings.max_argument_bytes,
        check=task_checker(not no_check_args),
        reach=cli.settings.callback_allow,
    )
    total = _count_rows(name, header=fmt == "csv" and not column_list) if not quiet else None
    with click.progressbar(
        length=total or 0,
        label="Importing",
        file=sys.stderr,
        show_pos=True,
        hidden=quiet or not total,
    ) as bar:
        done = [0]

        def progress(created: int, existing: int) -> None:
            bar.update(created + existing - done[0])
            done[0] = created + existing

        summary = cli.store.import_tasks(
            tasks, now=current, batch_size=batch_size, progress=progress
        )
    elapsed = time.monotonic() - started
    if as_json:
        emit_json({"created": summary.created, "existing": summary.existing, "seconds": elapsed})
        return
    click.echo(
        f"Created {plural(summary.created, 'task')} ({summary.existing} already existed) "
        f"in {elapsed:.1f} s"
    )


def _count_rows(name: str, *, header: bool) -> int | None:
    """The task lines of file ``name``, for the progress bar: the lines
    that are not blank, less the header row (``None`` for stdin)."""
    path = Path(name)
    if name == "-" or not path.is_file():
        return None
    with path.open("rb") as stream:
        lines = sum(1 for line in stream if line.strip())
    return max(0, lines - 1) if header else lines


#: what an action's tasks say when it changed them, by action
DONE = {
    "respawn": "respawned",
    "enable": "enabled",
    "disable": "disabled",
    "cancel": "cancelled",
}


def _act(
    cli: CliContext, action: str, ids: tuple[int, ...], changed: list[Task], as_json: bool
) -> None:
    """Say what ``action`` did to each task: changed (stdout, or the JSON
    list of the changed tasks), or why not (stderr, in both forms, its
    instants in UTC as every human output's by default)."""
    done = {t.id for t in changed}
    if as_json:
        emit_json([render.task_json(t) for t in changed])
    else:
        for item in changed:
            click.echo(f"Task {item.id}: {DONE[action]} (status {item.status})")
    skipped = [i for i in ids if i not in done]
    if skipped:
        known = {t.id: t for t in cli.store.get_tasks(skipped)}
        at = now()
        for task_id in skipped:
            if task_id in known:
                with render.one_clock(UTC):
                    reason = conditions.unchanged_reason(cli.store, action, task_id, at)
                say(f"Task {task_id}: {reason}", err=True)
        _require_known(skipped, known)  # deleted meanwhile


def _require(cli: CliContext, ids: tuple[int, ...]) -> None:
    """Refuse ids of no task, before anything changes (one error line)."""
    _require_known(ids, {t.id for t in cli.store.get_tasks(list(ids))})


def _require_known(ids: Iterable[int], known: Container[int | None]) -> None:
    unknown = sorted({i for i in ids if i not in known})
    if unknown:
        raise NotFound(f"no task with id {', '.join(map(str, unknown))}")


ids_argument = click.argument("ids", nargs=-1, required=True, type=int, metavar="ID...")


@click.command("respawn")
@ids_argument
@click.option("--next-run", "-n", help="Their earliest start (ISO 8601, default now).")
@json_option
@pass_cli
def respawn(cli: CliContext, ids: tuple[int, ...], next_run: str | None, as_json: bool) -> None:
    """Make tasks runnable again now (or at --next-run), whatever their status,
    except a task whose run is still open (dispatched or running): each task
    left unchanged is told on stderr with the reason (its open run, where it
    is, and what to do)."""
    current = now()
    at = parse_datetime("next_run", next_run) if next_run else current
    _require(cli, ids)
    _act(cli, "respawn", ids, cli.store.respawn_tasks(list(ids), next_run=at, now=current), as_json)
