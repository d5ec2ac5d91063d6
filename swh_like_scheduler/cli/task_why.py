"""``swh scheduler task runs|explain|status``: why a task runs, or does not,
in words: its runs with their errors, its start times, condition and
retries, and the tasks that are not OK, the most late first."""

from __future__ import annotations

import shutil
from datetime import timedelta, tzinfo

import click

from .. import policy
from ..domain.exceptions import InvalidInput, NotFound, UnknownTaskType
from ..domain.model import ScheduleKind, Task, TaskType
from ..domain.text import plural
from ..domain.validation import parse_datetime
from ..health import conditions
from ..health.waits import why_it_waits
from ..policy.times import fmt_duration
from . import render
from .base import CliContext, emit_json, now, pass_cli, say
from .filters import key_prefix_option, kind_option, type_option
from .task import json_option


@click.command("runs")
@click.argument("task_id", type=int)
@click.option("--limit", "-l", default=20, show_default=True, type=click.IntRange(1))
@click.option("--full", is_flag=True, help="Whole error texts, not their first line.")
@render.tz_option()
@json_option
@pass_cli
def runs(
    cli: CliContext, task_id: int, limit: int, full: bool, zone: tzinfo, as_json: bool
) -> None:
    """The latest runs of task TASK_ID, newest first: each run's number,
    Celery id, status, times and worker, with its error (the first line,
    cut to fit the terminal; --full: the whole text), and how many runs the
    store keeps in all (--limit shows more). --json: the runs listed, each
    with its whole error."""
    if not cli.store.get_tasks([task_id]):
        raise NotFound(f"no task with id {task_id}")
    found = cli.store.get_task_runs(task_id, limit=limit)
    if as_json:
        emit_json([render.run_json(r) for r in found])
        return
    total = cli.store.count_task_runs(task_id)
    if len(found) < total:
        click.echo(
            f"Found {len(found)} of {plural(total, 'run')} of task {task_id}, newest first "
            f"(--limit {total} lists them all)"
        )
    else:
        click.echo(f"Found {plural(total, 'run')} of task {task_id}")
    if found:
        columns = shutil.get_terminal_size().columns
        with render.one_clock(zone):
            say(render.zone_line(zone), *render.runs_table(found, columns=columns, full=full))


def _task_and_type(cli: CliContext, task_id: int) -> tuple[Task, TaskType]:
    found = cli.store.get_tasks([task_id])
    if not found:
        raise NotFound(f"no task with id {task_id}")
    task_type = cli.store.get_task_type(found[0].type)
    if task_type is None:  # pragma: no cover - the foreign key forbids it
        raise UnknownTaskType(found[0].type)
    return found[0], task_type


@click.command("explain")
@click.argument("task_id", type=int)
@click.option("--at", "at", help="Explain as of this instant (ISO 8601, default now).")
@render.tz_option()
@json_option
@pass_cli
def explain(cli: CliContext, task_id: int, at: str | None, zone: tzinfo, as_json: bool) -> None:
    """Why is task TASK_ID (not) running? Its earliest and latest start,
    its condition, what moved them, its latest run's state (dispatched and
    not started, running on which worker since when, or ended without its
    end reaching the task), its last failure (run, time, error) and what
    the retry policy does next; for a task that is due, where it stands in
    line: ready tasks before it, runs in its queue against the limit, and
    when it should start at the last hour's rate. Every time is in one
    zone (--tz, default UTC), named on the first line."""
    item, task_type = _task_and_type(cli, task_id)
    instant = parse_datetime("at", at) if at else now()
    with render.one_clock(zone, as_json=as_json):
        failure = conditions.last_failure(cli.store, task_id)
        run = conditions.latest_run_state(
            cli.store,
            item,
            instant,
            queue=task_type.effective_queue,
            backend=task_type.backend_name,
        )
        answer = policy.explain(item, task_type, instant, last_failure=failure, run=run)
        line = why_it_waits(cli.store, item, task_type, instant)
        if as_json:
            emit_json({**answer.to_dict(), "waits": None if line is None else line.to_dict()})
            return
        waits = [] if line is None else [f"In line: {line.detail()}"]
        say(render.zone_line(zone), *answer.lines(), *waits)


def lateness(seconds: float | None) -> str:
    """``3m05s late``, ``due in 2h``; empty without a finish-by."""
    if seconds is None:
        return ""
    if seconds >= 0:
        return f"{fmt_duration(timedelta(seconds=int(seconds)))} late"
    return f"due in {fmt_duration(timedelta(seconds=int(-seconds)))}"


@click.command("status")
@type_option(dest="task_type")
@kind_option()
@key_prefix_option()
@click.option(
    "--show",
    "show_level",
    type=click.Choice(["ERROR", "WARNING", "OK"], case_sensitive=False),
    help="Also list the tasks at exactly this level, the most late first.",
)
@click.option(
    "--at-least",
    is_flag=True,
    help="With --show: the tasks at that level or worse, the worst level first.",
)
@click.option(
    "--limit",
    "-l",
    default=20,
    show_default=True,
    type=click.IntRange(1),
    help="Most tasks listed by --show (a last line says how many more there are).",
)
@render.tz_option()
@json_option
@pass_cli
def status(
    cli: CliContext,
    task_type: str | None,
    kind: str | None,
    key_prefix: str | None,
    show_level: str | None,
    at_least: bool,
    limit: int,
    zone: tzinfo,
    as_json: bool,
) -> None:
    """Conditions of the live and disabled tasks (one that gave up after its
    retries is in ERROR): how many are OK, WARNING or ERROR, per type.

    Counted now, by reading every waiting, scheduled and disabled task once,
    a page of 1000 at a time (completed and cancelled ones are OK by
    definition and not read), and computing its condition at this instant:
    the counts, the order and the number of tasks not listed are exact;
    memory stays bounded (the --limit worst so far), time grows with the
    tasks (measured: 19 s per 100,000 on PostgreSQL, on a busy 2-core
    machine). The console and GET /conditions show counts made in the
    background instead."""
    if at_least and show_level is None:
        raise InvalidInput("at_least", "--at-least needs --show LEVEL")
    with render.one_clock(zone, as_json=as_json):
        summary = conditions.summarise(
            cli.store,
            now(),
            task_type=task_type,
            kind=ScheduleKind(kind) if kind else None,
            key_prefix=key_prefix,
            show=show_level,
            limit=limit,
            at_least=at_least,
        )
    if as_json:
        data = {k: v for k, v in summary.to_dict().items() if k != "now"}
        emit_json({**data, "show": show_level, "at_least": at_least})
        return
    counts = summary.counts
    click.echo(f"{'TYPE':<24} {'OK':>9} {'WARNING':>9} {'ERROR':>9}")
    for name, per_type in sorted(counts.items()):
        click.echo(
            f"{name:<24} {per_type['OK']:>9} {per_type['WARNING']:>9} {per_type['ERROR']:>9}"
        )
    if show_level is None:
        return
    what = f"{show_level} or worse" if at_least else show_level
    order = "worst first, then the most late" if at_least else "the most late first"
    click.echo("")
    if not summary.matched:
        click.echo(f"No task in {what}.")
        return
    click.echo(f"Tasks in {what} ({summary.matched:,} in all), {order}:")
    click.echo(render.zone_line(zone))
    for entry in summary.tasks:
        item, report = entry.task, entry.report
        late = lateness(entry.late)
        say(
            f"Task {item.id} ({item.type}): {report.level} {report.reason}"
            f"{f' ({late})' if late else ''} - {report.detail}"
        )
    more = summary.matched - len(summary.tasks)
    if more:
        click.echo(f"... and {more:,} more (--limit {summary.matched} lists them all)")


__all__ = ["explain", "lateness", "runs", "status"]
