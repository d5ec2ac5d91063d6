"""``swh scheduler task list`` and ``task list-pending``: tasks for people,
one line each (or a block each with ``-v``), in one time zone, with how many
match when the list is cut."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, tzinfo

import click

from ..domain.exceptions import UnknownTaskType
from ..domain.model import Priority, ScheduleKind, Task, TaskStatus, TaskType
from ..domain.text import plural
from ..domain.validation import parse_datetime
from ..health import conditions
from ..policy.condition import ConditionReport
from ..store import TaskFilter
from . import render
from .base import CliContext, emit_json, now, pass_cli, say
from .filters import condition_option, key_prefix_option, kind_option, status_option, type_option
from .task import json_option

verbose_option = click.option(
    "--verbose", "-v", is_flag=True, help="A block of lines per task instead of one line."
)


@dataclass(frozen=True)
class Listing:
    """The tasks a ``task list`` shows, and what its first line says of them."""

    tasks: list[Task]
    #: more tasks match after the last one shown
    cut: bool
    #: how many match in all (``None``: not counted, as with --condition)
    total: int | None
    after_id: int = 0
    #: the condition levels asked for (--condition), upper case
    levels: tuple[str, ...] = ()

    def heading(self) -> str:
        """``Found 3 tasks``, or ``Showing 100 of 20,000 tasks (use --limit,
        or --after-id 100 for the next)`` when the list was cut."""
        shown = len(self.tasks)
        where = f" in {' or '.join(self.levels)}" if self.levels else ""
        above = f", ids above {self.after_id}" if self.after_id else ""
        more = ""
        if self.cut and self.tasks:
            more = f" (use --limit, or --after-id {self.tasks[-1].id} for the next)"
        if self.total is not None and (self.cut or self.after_id):
            return f"Showing {shown:,} of {plural(self.total, 'task')}{where}{above}{more}"
        if self.cut:  # not counted: the condition is computed task by task
            return f"Showing the first {plural(shown, 'task')}{where}{above}{more}"
        return f"Found {plural(shown, 'task')}{where}{above}"


def _read(
    cli: CliContext,
    criteria: TaskFilter,
    keep: Callable[[Task], bool] | None,
    after_id: int,
    limit: int,
) -> tuple[list[Task], bool]:
    """The first ``limit`` tasks after ``after_id`` that match ``criteria``
    (and ``keep``, read a page at a time until enough match), and whether
    more match."""
    if keep is None:
        page = cli.store.search_tasks(criteria, after_id=after_id, limit=limit + 1)
        return page[:limit], len(page) > limit
    found: list[Task] = []
    while len(found) <= limit:
        page = cli.store.search_tasks(criteria, after_id=after_id, limit=conditions.PAGE)
        if not page:
            break
        after_id = page[-1].id or after_id
        found.extend(t for t in page if keep(t))
    return found[:limit], len(found) > limit


def _not_oneshot(task: Task) -> bool:
    return task.schedule_kind is not ScheduleKind.ONESHOT


def listing(
    cli: CliContext,
    criteria: TaskFilter,
    *,
    policy: str | None,
    levels: tuple[str, ...],
    types: dict[str, TaskType],
    at: datetime,
    after_id: int,
    limit: int,
) -> Listing:
    """The tasks of ``task list``: a policy is a schedule kind (one-shot or
    not) the store filters and counts; a condition is computed here, so a
    list filtered by one is read page by page and not counted."""
    keep: Callable[[Task], bool] | None = None
    kind = criteria.schedule_kind
    if policy == "oneshot":
        if kind not in (None, ScheduleKind.ONESHOT):
            return Listing([], False, 0, after_id)
        criteria = replace(criteria, schedule_kind=ScheduleKind.ONESHOT)
    elif policy == "recurring":
        if kind is ScheduleKind.ONESHOT:
            return Listing([], False, 0, after_id)
        keep = _not_oneshot if kind is None else None
    wanted = tuple(sorted({lv.upper() for lv in levels}, key=conditions.LEVELS.index, reverse=True))
    if wanted:

        def at_level(task: Task, also: Callable[[Task], bool] | None = keep) -> bool:
            if also is not None and not also(task):
                return False
            report, _ = conditions.assess(task, types[task.type], at)
            return report.level.value in wanted

        keep = at_level
    found, cut = _read(cli, criteria, keep, after_id, limit)
    total: int | None = None
    if not wanted and (cut or after_id):
        total = cli.store.count_tasks(criteria)
        if keep is not None:  # recurring: all but the one-shot ones
            oneshot = replace(criteria, schedule_kind=ScheduleKind.ONESHOT)
            total -= cli.store.count_tasks(oneshot)
    return Listing(found, cut, total, after_id, wanted)


@click.command("list")
@click.option("--task-id", "-i", "ids", multiple=True, type=int, help="Only these ids.")
@type_option()
@kind_option()
@status_option()
@condition_option()
@key_prefix_option()
@click.option("--policy", "-p", type=click.Choice(["recurring", "oneshot"]))
@click.option("--priority", "-P", type=click.Choice([p.value for p in Priority]))
@click.option("--before", help="Only tasks whose earliest start is before this instant.")
@click.option("--after-id", default=0, show_default=True, help="Page: ids above this one.")
@click.option("--limit", "-l", default=100, show_default=True, type=click.IntRange(1))
@verbose_option
@render.tz_option()
@json_option
@pass_cli
def list_tasks(
    cli: CliContext,
    ids: tuple[int, ...],
    type_name: str | None,
    kind: str | None,
    statuses: tuple[str, ...],
    levels: tuple[str, ...],
    key_prefix: str | None,
    policy: str | None,
    priority: str | None,
    before: str | None,
    after_id: int,
    limit: int,
    verbose: bool,
    zone: tzinfo,
    as_json: bool,
) -> None:
    """List tasks, by increasing id (page with --after-id), one line each:
    id, type, status, condition (level and reason), earliest start, last
    run and key (cut in its middle to fit); -v: a block of lines each.
    With --condition, each line ends with the condition's reason in words.

    The first line says how many tasks there are, and when --limit cut the
    list, how many match in all ("Showing 100 of 20,000 tasks"), counted by
    the database; with --condition the tasks are read a page at a time
    until --limit of them match, and not counted (`task status` counts
    them). --json: the tasks as the API gives them, each with its
    condition."""
    at = now()
    types = {t.type: t for t in cli.store.get_task_types()}
    if ids:
        found = [t for t in cli.store.get_tasks(list(ids)) if policy in (None, t.policy.value)]
        shown = Listing(found, False, len(found))
    else:
        criteria = TaskFilter(
            type=type_name,
            status=[TaskStatus(s) for s in statuses] or None,
            priority=Priority(priority) if priority else None,
            schedule_kind=ScheduleKind(kind) if kind else None,
            key_prefix=key_prefix,
            next_run_before=parse_datetime("before", before) if before else None,
        )
        shown = listing(
            cli,
            criteria,
            policy=policy,
            levels=levels,
            types=types,
            at=at,
            after_id=after_id,
            limit=limit,
        )
    with render.one_clock(zone, as_json=as_json):  # the conditions' sentences too
        reports = {t.id: _condition(t, types, at) for t in shown.tasks}
        if as_json:
            emit_json(
                [{**render.task_json(t), "condition": _json(reports[t.id])} for t in shown.tasks]
            )
            return
        show(shown, reports, at, zone=zone, verbose=verbose)


def _condition(task: Task, types: dict[str, TaskType], at: datetime) -> ConditionReport | None:
    task_type = types.get(task.type)
    return None if task_type is None else conditions.assess(task, task_type, at)[0]


def _json(report: ConditionReport | None) -> dict[str, str] | None:
    return None if report is None else report.to_dict()


def show(
    shown: Listing,
    reports: dict[int | None, ConditionReport | None],
    at: datetime,
    *,
    zone: tzinfo,
    verbose: bool,
) -> None:
    """The heading, the zone's line, the tasks (a table, or blocks), and
    the heading again under a cut list."""
    heading = shown.heading()
    say(heading)
    if not shown.tasks:
        return
    say(render.zone_line(zone))
    if verbose:
        for item in shown.tasks:
            say("", *render.task_lines(item, at))
    else:
        columns = shutil.get_terminal_size().columns
        rows = [(t, reports[t.id]) for t in shown.tasks]
        say(*render.tasks_table(rows, columns=columns, detail=bool(shown.levels)))
    if shown.cut:
        say(heading)


@click.command("list-pending")
@click.argument("task_type")
@click.option("--limit", "-l", default=100, show_default=True, type=click.IntRange(1))
@click.option("--before", "-b", help="Ready at this instant (default now).")
@click.option(
    "--priority", "-P", "priorities", multiple=True, type=click.Choice([p.value for p in Priority])
)
@render.tz_option()
@json_option
@pass_cli
def list_pending(
    cli: CliContext,
    task_type: str,
    limit: int,
    before: str | None,
    priorities: tuple[str, ...],
    zone: tzinfo,
    as_json: bool,
) -> None:
    """Tasks of TASK_TYPE ready to run, in the order the runner dispatches them."""
    if cli.store.get_task_type(task_type) is None:
        raise UnknownTaskType(task_type)
    at = parse_datetime("before", before) if before else now()
    pending = cli.store.list_pending(
        task_type, now=at, limit=limit, priorities=[Priority(p) for p in priorities] or None
    )
    if as_json:
        emit_json([render.task_json(t) for t in pending])
        return
    say(f"Found {plural(len(pending), f'{task_type} task')}")
    if pending:
        with render.one_clock(zone):
            say(render.zone_line(zone))
            current = now()
            for item in pending:
                say("", *render.task_lines(item, current))


__all__ = ["Listing", "list_pending", "list_tasks", "listing"]
