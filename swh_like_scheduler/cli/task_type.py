"""``swh scheduler task-type …``: list, add, register, pause and resume task types."""

from __future__ import annotations

from typing import Any

import click

from ..domain.exceptions import InvalidInput, UnknownTaskType
from ..domain.jsonable import task_type_json
from ..domain.model import CatchUp, TaskType
from ..intake.builders import task_type_from_input
from ..plumbing.celery_factory import worker_registrations
from ..policy.times import fmt_instant
from .base import CliContext, emit_json, now, pass_cli, say
from .filters import Aliased


def paused_since(tt: TaskType) -> str | None:
    """``paused since INSTANT`` for a paused type, else ``None``."""
    return f"paused since {fmt_instant(tt.paused_at)}" if tt.paused_at is not None else None


def describe(tt: TaskType, verbose: bool) -> list[str]:
    """The swh-scheduler layout of one task type (a paused one says since when)."""
    about = [f"  {tt.description}"] if tt.description.strip() else []
    if not verbose:
        if tt.paused_at is not None:
            about.append(f"  PAUSED since {fmt_instant(tt.paused_at)}")
        return [f"{tt.type}:", *about] if about else [tt.type]
    return [
        f"{tt.type}: {tt.backend_name}",
        *about,
        f"  queue: {tt.effective_queue}",
        f"  interval: {tt.default_interval} [{tt.min_interval}, {tt.max_interval}]",
        f"  backoff_factor: {tt.backoff_factor}",
        f"  max_queue_length: {tt.max_queue_length}",
        f"  num_retries: {tt.num_retries}",
        f"  retry_delay: {tt.retry_delay} (x{tt.retry_growth:g}, cap {tt.retry_cap}, "
        f"jitter {tt.retry_jitter})",
        f"  max_expected_duration: {tt.max_expected_duration}",
        f"  max_allowed_duration: {tt.max_allowed_duration}",
        f"  lease: {'yes' if tt.uses_lease else 'no'}",
        f"  catch_up: {tt.catch_up} (grace {tt.catch_up_grace})",
        f"  paused: {fmt_instant(tt.paused_at) if tt.paused_at is not None else 'no'}",
    ]


@click.command("list")
@click.option("--verbose", "-v", is_flag=True, help="Show every setting of each type.")
@click.option(
    "--type",
    "-t",
    "--task-type",
    "--task_type",
    "names",
    cls=Aliased,
    aliases=("--task-type", "--task_type"),
    multiple=True,
    metavar="TYPE",
    help="Only these types (repeatable).",
)
@click.option("--json", "as_json_output", is_flag=True, help="Print JSON.")
@pass_cli
def list_types(
    cli: CliContext, verbose: bool, names: tuple[str, ...], as_json_output: bool
) -> None:
    """List the task types."""
    types = cli.store.get_task_types()
    if names:
        known = {t.type for t in types}
        missing = [n for n in names if n not in known]
        if missing:
            raise InvalidInput("task-type", f"unknown task type {missing[0]!r}")
        types = [t for t in types if t.type in names]
    if as_json_output:
        emit_json([task_type_json(t) for t in types])
        return
    click.echo("Known task types:")
    for tt in types:
        say(*describe(tt, verbose))


@click.command("add")
@click.argument("type_name", metavar="TYPE")
@click.argument("backend_name", metavar="TASK_NAME")
@click.argument("description", required=False, default="")
@click.option("--default-interval", "-i", help="Interval of new recurring tasks.")
@click.option("--min-interval", help="Shortest adaptive interval.")
@click.option("--max-interval", help="Longest adaptive interval.")
@click.option("--backoff-factor", "-f", help="Adaptive interval factor (> 1).")
@click.option("--queue", help="Celery queue (default: the task name).")
@click.option("--max-queue-length", help="Back-pressure: most messages waiting in the queue.")
@click.option("--num-retries", help="Retries after a failure (default: none).")
@click.option("--retry-delay", help="Delay before the first retry (default 5 min).")
@click.option("--retry-growth", help="Factor between consecutive retry delays (default 12).")
@click.option("--retry-cap", help="Longest retry delay (default 4 h).")
@click.option("--retry-jitter", help="Random extra delay, up to this (default 0).")
@click.option("--max-expected-duration", help="Longer runs are logged.")
@click.option("--max-allowed-duration", help="Longer runs are terminated and failed.")
@click.option("--lease/--no-lease", default=False, help="Workers use the lease protocol.")
@click.option(
    "--catch-up",
    type=click.Choice([c.value for c in CatchUp]),
    help="Missed firings (platform down): 'latest' runs once, late (default); 'skip' "
    "drops those later than --catch-up-grace and records them as a skipped run.",
)
@click.option("--catch-up-grace", help="How late a firing may still run with skip (default 5 min).")
@click.option("--json", "as_json", is_flag=True, help="Print the type created as JSON.")
@pass_cli
def add_type(cli: CliContext, type_name: str, as_json: bool, **options: Any) -> None:
    """Create task type TYPE, run by the Celery task TASK_NAME.

    Durations read like '90', '5 min', '1h30m', '3 days', '12:00:00' or 'PT5M'.
    """
    options["type"] = type_name
    options["uses_lease"] = options.pop("lease")
    created = cli.store.create_task_type(task_type_from_input(options))
    if as_json:
        emit_json([task_type_json(created)])
        return
    click.echo(f"Task type {created.type} created")


@click.command("pause")
@click.argument("name", metavar="TYPE")
@pass_cli
def pause_type(cli: CliContext, name: str) -> None:
    """Stop dispatching the tasks of TYPE until it is resumed.

    Its tasks keep waiting (nothing is lost); runs already dispatched or
    running finish normally. Pausing a paused type keeps its first instant.
    """
    current = now()
    paused = cli.store.pause_task_type(name, now=current)
    if paused.paused_at == current:
        click.echo(f"Task type {name} paused at {fmt_instant(current)}")
    else:
        click.echo(f"Task type {name} was already {paused_since(paused)}")


@click.command("resume")
@click.argument("name", metavar="TYPE")
@pass_cli
def resume_type(cli: CliContext, name: str) -> None:
    """Dispatch the tasks of TYPE again (the next runner pass claims them)."""
    before = cli.store.get_task_type(name)
    if before is None:
        raise UnknownTaskType(name)
    cli.store.resume_task_type(name)
    if before.paused_at is None:
        click.echo(f"Task type {name} was not paused")
    else:
        click.echo(f"Task type {name} resumed (it was {paused_since(before)})")


def worker_declarations() -> list[tuple[str, dict[str, Any]]]:
    """Task type declarations of every installed worker package."""
    return [
        (name, dict(spec))
        for name, registration in worker_registrations()
        for spec in registration.get("task_types", ())
    ]


@click.command("register")
@click.option("--plugin", "-p", "plugins", multiple=True, help="Only these entry points.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON: each declared type, its plugin and whether it was created.",
)
@pass_cli
def register_types(cli: CliContext, plugins: tuple[str, ...], as_json: bool) -> None:
    """Create the task types declared by installed worker packages
    (the ``swh.workers`` entry points); existing types are left as they are."""
    declared = [(p, spec) for p, spec in worker_declarations() if not plugins or p in plugins]
    if not declared:
        click.echo("No worker package declares task types", err=True)
        if as_json:
            emit_json([])
        return
    parsed = [(plugin, task_type_from_input(spec)) for plugin, spec in declared]
    existing = {t.type for t in cli.store.get_task_types()}
    report = []
    for plugin, tt in parsed:
        created = tt.type not in existing
        if created:
            cli.store.create_task_type(tt)
        report.append({"plugin": plugin, "created": created, "task_type": task_type_json(tt)})
        if not as_json:
            state = "created" if created else "already registered"
            say(f"{tt.type} (from {plugin}): {state}")
    if as_json:
        emit_json(report)
