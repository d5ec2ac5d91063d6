"""``swh scheduler index …``: the optional Redis index of waiting tasks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from ..domain.exceptions import InvalidInput, SchedulerError
from .base import CliContext, emit_json, pass_cli, reported
from .filters import type_option

if TYPE_CHECKING:
    from ..index import RedisIndex


def _index(cli: CliContext) -> RedisIndex:
    index = cli.index()
    if index is None:
        raise reported(InvalidInput("index-url", "no index is set: give --index-url"))
    return index


def _types(cli: CliContext, types: tuple[str, ...]) -> list[str]:
    known = [t.type for t in cli.store.get_task_types()]
    for name in types:
        if name not in known:
            raise reported(InvalidInput("type", f"{name!r} is not a registered task type"))
    return list(types) or known


@click.command("status")
@type_option("Only these types (repeatable).", dest="types", multiple=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def status(cli: CliContext, types: tuple[str, ...], as_json: bool) -> None:
    """Whether each type's index is complete (in use), what its rebuild is
    doing if not, and its sizes."""
    index = _index(cli)
    rows: dict[str, Any] = {}
    now = datetime.now(UTC)
    try:
        for name in _types(cli, types):
            activity = index.rebuild_activity(name, now=now)
            row: dict[str, Any] = {"complete": activity == "complete", **index.sizes(name)}
            if not row["complete"]:
                row["rebuild"] = activity
                # how far the rebuild under way (or stalled) got
                row["rebuild_filed"] = (
                    int(index.rebuild_state(name).get("filed", 0)) if activity != "none" else 0
                )
            rows[name] = row
    except SchedulerError as error:
        raise reported(error) from None
    if as_json:
        emit_json(rows)
        return
    for name, row in rows.items():
        click.echo(
            f"{name}: {_state(row)}; waiting {row['wait']}, ready {row['ready']}, "
            f"claimed {row['claimed']}"
        )


def _state(row: dict[str, Any]) -> str:
    if row["complete"]:
        return "complete"
    activity = row["rebuild"]
    if activity == "under way":
        return f"not in use (rebuild under way: {row['rebuild_filed']} filed so far)"
    if activity == "stalled":
        return (
            f"not in use (rebuild stalled at {row['rebuild_filed']} filed: no process "
            "works on it; the next runner pass or 'index rebuild' resumes it)"
        )
    return (
        "not in use (not built, emptied or invalidated, no rebuild under way: the next "
        "runner pass or 'index rebuild' builds it)"
    )


@click.command("rebuild")
@type_option("Only these types (repeatable).", dest="types", multiple=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def rebuild_command(cli: CliContext, types: tuple[str, ...], as_json: bool) -> None:
    """Fill each type's index anew from the database, with any runner that
    joins (runners claim from the database until it is complete)."""
    from ..index import rebuild

    index = _index(cli)
    failed = False
    #: per type: the waiting tasks filed (``rebuilt``), or not rebuilt
    totals: dict[str, dict[str, Any]] = {}
    try:
        for name in _types(cli, types):
            index.invalidate(name)
            filed = rebuild(index, cli.store, name)
            totals[name] = {"rebuilt": filed is not None, "filed": filed}
            if filed is None:
                failed = True
                if not as_json:
                    click.echo(f"{name}: not rebuilt (begun anew by another process meanwhile)")
            elif not as_json:
                click.echo(f"{name}: {filed} waiting tasks filed")
    except SchedulerError as error:
        raise reported(error) from None
    if as_json:
        emit_json(totals)
    if failed:
        raise click.exceptions.Exit(1)


@click.command("check")
@type_option("Only these types (repeatable).", dest="types", multiple=True)
@click.option("--page", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def check(cli: CliContext, types: tuple[str, ...], page: int, as_json: bool) -> None:
    """Compare every waiting task with its index entry and repair those that
    differ (missing, or filed at other times), then take out the entries of
    tasks no longer waiting (disabled, finished, deleted). An index that is
    not complete (being rebuilt, or emptied) is not checked: it is said so."""
    index = _index(cli)
    totals: dict[str, dict[str, Any]] = {}
    try:
        for name in _types(cli, types):
            totals[name] = _check_type(index, cli, name, page)
    except SchedulerError as error:
        raise reported(error) from None
    if as_json:
        emit_json(totals)
        return
    for name, row in totals.items():
        if not row["complete"]:
            click.echo(f"{name}: not checked: the index is not complete (see 'index status')")
            continue
        click.echo(
            f"{name}: {row['checked']} waiting tasks checked, {row['missing']} missing "
            f"and {row['wrong']} filed at other times (repaired); {row['stray']} entries "
            "of tasks no longer waiting (removed)"
        )


def _check_type(index: RedisIndex, cli: CliContext, name: str, page: int) -> dict[str, Any]:
    from ..index import drift, strays

    checked = missing = wrong = stray = 0
    after = 0
    while (found := drift(index, cli.store, name, after_id=after, limit=page)).checked:
        checked, missing, wrong = (
            checked + found.checked,
            missing + found.missing,
            wrong + found.wrong,
        )
        after = found.last_id
    complete = found.complete
    cursor = 0
    while complete:
        slice_ = strays(index, cli.store, name, cursor=cursor, count=page)
        complete, stray, cursor = slice_.complete, stray + slice_.removed, slice_.cursor
        if cursor == 0:
            break
    if not complete:  # emptied or invalidated meanwhile: the figures say nothing
        return {"complete": False}
    return {
        "complete": True,
        "checked": checked,
        "missing": missing,
        "wrong": wrong,
        "stray": stray,
    }
