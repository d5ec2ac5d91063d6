"""``swh scheduler task update`` and ``task-type update``: edit in place.

What may change, and when, is :mod:`..editing`'s; the store applies it in
one transaction and the policy engine computes the task's new times.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC
from typing import Any

import click

from ..beat.report import KEY_PREFIX
from ..domain.exceptions import InvalidInput, NotFound
from ..domain.jsonable import task_type_json
from ..domain.model import Priority, ScheduleKind, Task
from ..intake.argcheck import check_callback_url
from ..intake.edit import held
from ..intake.editing import (
    TASK_EDITABLE,
    TASK_TYPE_EDITABLE,
    TASK_TYPE_IDLE,
    Applies,
    nullable_task_inputs,
    nullable_type_inputs,
    task_changes,
    task_type_changes,
)
from ..policy.explain import EARLIEST_START, LATEST_START
from ..policy.times import fmt_instant
from . import render
from .arguments import checked_arguments, no_check_args_option
from .base import CliContext, emit_json, now, pass_cli, say
from .task import _window, json_option, split_arguments
from .task_type import describe

#: fields shown in the summary of a task edit, with their labels
_SHOWN = (
    "schedule_kind",
    "period",
    "cooldown",
    "cron",
    "cron_max_duration",
    "current_interval",
    "max_delay",
    "priority",
    "tz",
    "blackout_periods",
    "dont_run_on_nodes",
    "args",
    "kwargs",
    "max_expected_duration",
    "max_allowed_duration",
    "expected_duration",
    "failure_count",
    "catch_up",
    "catch_up_grace",
    "next_run",
    "deadline",
)

_IDLE = ", ".join(sorted(k for k, v in TASK_EDITABLE.items() if v is Applies.IDLE))

#: the fields people read under another name (the instants' labels)
_LABELS = {
    "next_run": f"{EARLIEST_START.lower()} (next_run)",
    "deadline": f"{LATEST_START.lower()} (deadline)",
}


def _shown(value: Any) -> str:
    if isinstance(value, tuple) and value and not isinstance(value[0], str | int | float):
        return ", ".join(str(v) for v in value) or "()"
    if hasattr(value, "isoformat") and hasattr(value, "tzinfo"):
        return fmt_instant(value)
    return "none" if value is None else str(value)


def changed_lines(before: Task, after: Task) -> list[str]:
    """``  field: old -> new`` for each field an edit changed (instants in
    the reader's zone, :func:`..policy.times.shown_in`)."""
    return [
        f"  {_LABELS.get(name, name)}: {_shown(getattr(before, name))} -> "
        f"{_shown(getattr(after, name))}"
        for name in _SHOWN
        if getattr(before, name) != getattr(after, name)
    ]


@click.command("update")
@click.argument("items", nargs=-1, metavar="ID|--key K [ARG | KEY=VALUE]...")
@click.option("--key", help="The task with this client key (instead of ID).")
@click.option("--kind", type=click.Choice([k.value for k in ScheduleKind]), help="Schedule kind.")
@click.option("--period", help="Periodic: longest acceptable staleness.")
@click.option("--cooldown", help="Periodic: pause after a run.")
@click.option("--cron", help="Cron expression, read in the task's zone.")
@click.option("--cron-max-duration", help="Cron: time allowed after each firing.")
@click.option("--interval", "-i", help="Adaptive interval.")
@click.option("--max-delay", help="One-shot: allowed lateness.")
@click.option("--priority", "-P", type=click.Choice([p.value for p in Priority]))
@click.option("--tz", help="IANA time zone.")
@click.option(
    "--blackout",
    "blackouts",
    multiple=True,
    metavar="HH:MM-HH:MM|none",
    help="Local windows in which it must not run (repeatable; replace the current ones).",
)
@click.option(
    "--dont-run-on",
    "nodes",
    multiple=True,
    metavar="NODE|none",
    help="Banned nodes (repeatable; replace the current ones).",
)
@click.option("--expected-duration", help="Override of the measured average duration.")
@click.option("--max-expected-duration", help="Longer runs are logged.")
@click.option("--max-allowed-duration", help="Longer runs are terminated.")
@click.option("--clear-arguments", is_flag=True, help="Call the task with no arguments.")
@click.option(
    "--replace-arguments",
    is_flag=True,
    help="The ARG and KEY=VALUE items given are all the task's arguments "
    "(default: KEY=VALUE items are merged into its keyword arguments).",
)
@click.option("--reset-retries", is_flag=True, help="Forget the failures in a row.")
@click.option("--catch-up", help="Missed firings: latest, skip, or none (the type's).")
@click.option("--catch-up-grace", help="How late a firing may run with skip (none: the type's).")
@no_check_args_option
@json_option
@pass_cli
def update_task(
    cli: CliContext,
    items: tuple[str, ...],
    key: str | None,
    blackouts: tuple[str, ...],
    nodes: tuple[str, ...],
    clear_arguments: bool,
    replace_arguments: bool,
    reset_retries: bool,
    no_check_args: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Change task ID (or the one with --key K) in place.

    ARG and KEY=VALUE items are read as in `task add`: each KEY=VALUE sets
    that keyword argument and keeps the others; ARG items, if any, replace
    the positional arguments (--replace-arguments: the items given are all
    the arguments). The new earliest and latest start are computed by the policy
    engine for the new schedule from the task's history (a new period keeps
    the last good run as anchor; a new cron expression gives its first
    firing after the last good run's start, due at once if that is past).

    'none' unsets a nullable field: {nullable}. Changing the kind clears
    the parameters of the old one.

    While a run holds the task (dispatched or running) {idle} are refused;
    the other fields are stored at once and the times after that run are
    computed with them.
    """
    target, arguments = _target(items, key)
    values: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    store = cli.store
    before: Task | None = None
    if arguments or clear_arguments:
        if arguments and clear_arguments:
            raise InvalidInput("clear-arguments", "give arguments or --clear-arguments, not both")
        args, kwargs = split_arguments(arguments)
        if arguments and not replace_arguments:
            before = _current(store, target, key)
            args = args or list(before.args)
            kwargs = {**before.kwargs, **kwargs}
        values.update(args=args, kwargs=kwargs)
    elif replace_arguments:
        raise InvalidInput("replace-arguments", "give the arguments that replace the task's")
    if blackouts:
        values["blackout_periods"] = _none_or(blackouts, lambda: [_window(b) for b in blackouts])
    if nodes:
        values["dont_run_on_nodes"] = _none_or(nodes, lambda: list(nodes))
    if reset_retries:
        values["reset_retries"] = True
    if not values:
        raise click.UsageError("nothing to change: give at least one field option")
    changes = task_changes(values)
    before = before or _current(store, target, key)
    if "args" in values:
        task_type = store.get_task_type(before.type)
        if task_type is not None:
            checked_arguments(task_type, values["args"], values["kwargs"], check=not no_check_args)
            check_callback_url(
                before.type,
                task_type.backend_name,
                values["args"],
                values["kwargs"],
                cli.settings.callback_allow,
            )
    edited = store.edit_task(task_id=target, key=key, changes=changes, now=now())
    _warn_if_imported(before, edited)
    if as_json:
        emit_json(render.task_json(edited))
        return
    with render.one_clock(UTC):
        lines = changed_lines(before, edited)
        if not lines:
            click.echo(f"Task {edited.id} unchanged")
            return
        click.echo(f"Task {edited.id} updated")
        say(render.zone_line(UTC), *lines)
        current = now()
        if held(edited):
            click.echo("A run holds the task: the times after it use the new values.")
        elif edited.status.is_live and edited.next_run <= current:
            click.echo(
                f"It may start now (its {EARLIEST_START.lower()}, "
                f"{fmt_instant(edited.next_run)}, is past)."
            )


update_task.help = (update_task.help or "").format(
    nullable=", ".join(nullable_task_inputs()), idle=_IDLE
)


#: the task fields a beat_schedule entry decides (an import puts them back)
_BEAT_FIELDS = ("type", "args", "kwargs", "schedule_kind", "period", "cron", "tz")


def _warn_if_imported(before: Task, edited: Task) -> None:
    """Say so when a task imported from a beat_schedule entry was edited in
    a field that the entry decides: the next import puts the entry's back."""
    moved = [f for f in _BEAT_FIELDS if getattr(before, f) != getattr(edited, f)]
    if not moved or not (edited.key or "").startswith(KEY_PREFIX):
        return
    entry = (edited.key or "").removeprefix(KEY_PREFIX)
    say(
        f"warning: task {edited.id} is beat_schedule entry {entry!r} (key {edited.key}): the "
        f"next import (swh scheduler import-beat, or celery beat -S swh at start) sets "
        f"{', '.join(moved)} back to the entry's; change the entry instead (it reports "
        "that update)",
        err=True,
    )


def _target(items: tuple[str, ...], key: str | None) -> tuple[int | None, tuple[str, ...]]:
    if key is not None:
        return None, items
    if not items:
        raise click.UsageError("give the task's ID, or --key K")
    try:
        task_id = int(items[0])
    except ValueError:
        raise click.UsageError(f"{items[0]!r} is not a task id (or use --key)") from None
    return task_id, items[1:]


def _none_or(given: tuple[str, ...], parse: Callable[[], Any]) -> Any:
    if len(given) == 1 and given[0].strip().lower() == "none":
        return None
    return parse()


def _current(store: Any, task_id: int | None, key: str | None) -> Task:
    found = store.get_task_by_key(key) if key is not None else None
    if task_id is not None:
        found = next(iter(store.get_tasks([task_id])), None)
    if found is None:
        raise NotFound(f"no task {task_id}" if key is None else f"no task with key {key!r}")
    return found


#: help of the ``task-type update`` options (a field without one gets a generic text)
_TYPE_HELP = {
    "description": "Free text.",
    "backend_name": "Celery task name (refused while runs of the type are open).",
    "queue": "Celery queue (refused while runs of the type are open).",
    "default_interval": "Interval of new adaptive tasks.",
    "min_interval": "Shortest adaptive interval.",
    "max_interval": "Longest adaptive interval.",
    "backoff_factor": "Adaptive interval factor (> 1).",
    "max_queue_length": "Back-pressure: most messages waiting in the queue.",
    "num_retries": "Retries after a failure.",
    "retry_delay": "Delay before the first retry.",
    "retry_growth": "Factor between consecutive retry delays.",
    "retry_cap": "Longest retry delay.",
    "retry_jitter": "Random extra delay, up to this.",
    "max_expected_duration": "Longer runs are logged.",
    "max_allowed_duration": "Longer runs are terminated and failed.",
    "uses_lease": "Workers use the lease protocol (true/false).",
    "catch_up": "Missed firings of its tasks: latest (run once, late) or skip.",
    "catch_up_grace": "How late a firing may still run with skip.",
}


def _type_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """One ``--field-name VALUE`` option per editable task type field."""
    for name in reversed(TASK_TYPE_EDITABLE):
        flag = "--" + name.replace("_", "-")
        help_text = _TYPE_HELP.get(name, f"New {name}.")
        command = click.option(flag, name, metavar="VALUE", help=help_text)(command)
    return command


@click.command("update")
@click.argument("name", metavar="TYPE")
@_type_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what the change would do to the type's tasks (the rules it would "
    "break, the intervals it would move); change nothing.",
)
@json_option
@pass_cli
def update_type(cli: CliContext, name: str, dry_run: bool, as_json: bool, **options: Any) -> None:
    """Change settings of task type TYPE in place.

    Durations read like '90', '5 min', '1h30m'. 'none' unsets a nullable
    setting: {nullable}. Its tasks keep their times, and the new settings
    apply from the next computation (a run's outcome), except tasks whose
    times read what changed (a retry awaited when the retry policy changes,
    an adaptive task on the default interval): their earliest and latest start are computed
    again at once, so that explain says what the runner does. A change that would make
    one of its tasks (live or disabled) break a rule it kept, e.g. retries
    whose worst case no longer fits a task's period, is refused, naming the
    setting; adaptive intervals outside new bounds are moved into them at
    their next run (--dry-run counts both). {idle} are refused while
    runs of the type are dispatched or running: pause the type and let
    them end first.
    """
    values = {k: v for k, v in options.items() if v is not None}
    if not values:
        raise click.UsageError("nothing to change: give at least one setting option")
    changes = task_type_changes(values)
    report = cli.store.preview_task_type_update(name, now=now(), **changes)
    if dry_run:
        refusal = report.refusal()
        if as_json:
            emit_json({**dataclasses.asdict(report), "refused": str(refusal) if refusal else None})
            return
        say(*report.lines())
        click.echo(f"Would be refused: {refusal}" if refusal else "Would be accepted (dry run).")
        return
    updated = cli.store.update_task_type(name, now=now(), **changes)
    if report.new_tasks is not None:
        click.echo(f"warning: a new adaptive task would be refused: {report.new_tasks}", err=True)
    if as_json:
        emit_json(task_type_json(updated))
        return
    click.echo(f"Task type {name} updated")
    for effect in report.moves:
        tasks = "1 task's" if effect.count == 1 else f"{effect.count:,} tasks'"
        click.echo(f"{tasks} {effect.field}: {effect.detail}")
    say(*describe(updated, True))


update_type.help = (update_type.help or "").format(
    nullable=", ".join(nullable_type_inputs()),
    idle=" and ".join(f"--{n.replace('_', '-')}" for n in sorted(TASK_TYPE_IDLE)),
)
