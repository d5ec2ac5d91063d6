"""``swh scheduler task disable|enable|cancel|delete``: on task ids, or on
every task a filter matches (counted and shown first, then confirmed)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from ..domain.exceptions import UnknownTaskType
from ..domain.model import RunStatus
from ..domain.text import plural
from ..store.values import BulkAction, BulkFilter, BulkReport
from .base import CliContext, Refused, emit_json, now, pass_cli, say
from .filters import condition_option, key_prefix_option, kind_option, status_option, type_option
from .task import _act, _literal, _require, json_option

#: tasks read per store call (each call writes in batches of ``--batch-size``)
WINDOW = 20_000
#: the flags that make a filter, as the refusal of an empty one names them
FILTER_FLAGS = "--type, --kind, --status, --condition, --key-prefix or --arg-match"

#: what each action did, in the past tense
DONE = {
    BulkAction.DISABLE: "disabled",
    BulkAction.ENABLE: "enabled",
    BulkAction.CANCEL: "cancelled",
    BulkAction.DELETE: "deleted",
}
#: the action's verb, and what the progress bar says
VERB = {
    BulkAction.DISABLE: ("Disable", "Disabling"),
    BulkAction.ENABLE: ("Enable", "Enabling"),
    BulkAction.CANCEL: ("Cancel", "Cancelling"),
    BulkAction.DELETE: ("Delete", "Deleting"),
}
#: why an action may leave a matched task as it is
HELD = {
    BulkAction.DISABLE: "changed meanwhile",
    BulkAction.ENABLE: "identical to a live task, or changed meanwhile",
    BulkAction.CANCEL: "changed meanwhile",
    BulkAction.DELETE: "an open run: cancel them first",
}


def bulk_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The ids argument and the filter, confirmation and output options."""
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.argument("ids", nargs=-1, type=int, metavar="[ID]..."),
        type_option("Filter: tasks of this type."),
        kind_option("Filter: tasks of this schedule kind."),
        status_option("Filter: tasks in this status (repeatable)."),
        condition_option(
            "Filter: tasks whose condition (as `task status` computes it, now) "
            "is at this level (repeatable)."
        ),
        key_prefix_option("Filter: tasks whose key starts with this."),
        click.option(
            "--arg-match",
            "arg_matches",
            multiple=True,
            metavar="NAME=VALUE",
            help="Filter: tasks whose keyword argument NAME (or positional argument "
            "at index NAME: 0, 1...) equals VALUE, read as JSON when it is (5, true, "
            '"5") and as text otherwise (repeatable: all must hold).',
        ),
        click.option("--all", "everything", is_flag=True, help="Every task (no filter)."),
        click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation."),
        click.option("--dry-run", is_flag=True, help="Only count and show a sample."),
        click.option(
            "--batch-size",
            default=1000,
            show_default=True,
            type=click.IntRange(1, 10_000),
            help="Tasks written per transaction.",
        ),
        json_option,
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _arguments(items: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not (name.isidentifier() or name.isdigit()):
            raise Refused(
                f"--arg-match: {item!r} is not NAME=VALUE (NAME: a keyword argument's "
                "name, or a position 0, 1...)"
            )
        pairs.append((name, _literal(value)))
    return tuple(pairs)


def _criteria(cli: CliContext, ids: tuple[int, ...], given: dict[str, Any]) -> BulkFilter:
    criteria = BulkFilter(
        type=given["type_name"],
        schedule_kind=given["kind"],
        status=given["statuses"] or None,
        condition=tuple(level.upper() for level in given["levels"]) or None,
        key_prefix=given["key_prefix"],
        arguments=_arguments(given["arg_matches"]),
        ids=ids or None,
        everything=given["everything"],
    )
    if criteria.type is not None and cli.store.get_task_type(criteria.type) is None:
        raise UnknownTaskType(criteria.type)
    return criteria


def _each_window(
    call: Callable[[int], BulkReport], seen: Callable[[BulkReport], None] | None = None
) -> BulkReport:
    report = call(0)
    if seen is not None:
        seen(report)
    while report.next_after_id is not None:
        following = call(report.next_after_id)
        if seen is not None:
            seen(following)
        report = report.then(following)
    return report


def _show_sample(cli: CliContext, report: BulkReport) -> None:
    for item in cli.store.get_tasks(list(report.sample)):
        key = f", key {item.key}" if item.key else ""
        say(f"  Task {item.id} ({item.type}, {item.status}{key})")
    if report.matched > len(report.sample):
        click.echo(f"  ... and {report.matched - len(report.sample):,} more")


def _summary(report: BulkReport, criteria: BulkFilter, dry_run: bool) -> dict[str, Any]:
    return {
        "action": report.action.value,
        "filter": criteria.describe(),
        "matched": report.matched,
        "changed": report.changed,
        "held": report.held,
        "sample": list(report.sample),
        "dry_run": dry_run,
    }


def run_bulk(
    cli: CliContext,
    action: BulkAction,
    criteria: BulkFilter,
    *,
    yes: bool,
    dry_run: bool,
    batch_size: int,
    as_json: bool,
    after_each: Callable[[BulkReport], None] | None = None,
) -> BulkReport:
    """Count, show, confirm, then act window after window."""
    started = now()
    preview = _each_window(
        lambda after: cli.store.preview_bulk(
            action, criteria, now=started, after_id=after, scan=WINDOW
        )
    )
    verb = DONE[action]
    if not as_json or not (yes or dry_run):
        out = sys.stderr if as_json else sys.stdout
        if preview.matched == 0:
            click.echo(f"No task to be {verb}: none matches ({criteria.describe()}).", file=out)
        else:
            click.echo(
                f"{plural(preview.matched, 'task')} ({criteria.describe()}) would be {verb}"
                + (f"; {preview.held:,} held ({HELD[action]})" if preview.held else "")
                + ":",
                file=out,
            )
            if not as_json:
                _show_sample(cli, preview)
    if dry_run or preview.matched == preview.held:
        if as_json:
            emit_json(_summary(preview, criteria, dry_run))
        return preview
    if not yes:
        count = preview.matched - preview.held
        click.confirm(f"{VERB[action][0]} {plural(count, 'task')}?", abort=True, err=True)
    with click.progressbar(
        length=preview.matched,
        label=VERB[action][1],
        file=sys.stderr,
        show_pos=True,
        hidden=as_json or preview.matched < 10 * batch_size,
    ) as bar:

        def seen(report: BulkReport) -> None:
            bar.update(report.matched)
            if after_each is not None:
                after_each(report)

        done = _each_window(
            lambda after: cli.store.apply_bulk(
                action, criteria, now=now(), after_id=after, scan=WINDOW, batch_size=batch_size
            ),
            seen,
        )
    if as_json:
        emit_json(_summary(done, criteria, False))
    else:
        held = f" ({done.held:,} left as they were: {HELD[action]})" if done.held else ""
        click.echo(f"{verb.capitalize()} {plural(done.changed, 'task')}{held}.")
    return done


def _by_filter(
    cli: CliContext,
    action: BulkAction,
    ids: tuple[int, ...],
    given: dict[str, Any],
    after_each: Callable[[BulkReport], None] | None = None,
) -> BulkReport:
    criteria = _criteria(cli, ids, given)
    return run_bulk(
        cli,
        action,
        criteria,
        yes=given["yes"],
        dry_run=given["dry_run"],
        batch_size=given["batch_size"],
        as_json=given["as_json"],
        after_each=after_each,
    )


def _filtered(ids: tuple[int, ...], given: dict[str, Any]) -> bool:
    """Whether a filter is given (else ids must be); refuses neither or both."""
    named = [
        flag
        for flag, key in (
            ("--type", "type_name"),
            ("--kind", "kind"),
            ("--status", "statuses"),
            ("--condition", "levels"),
            ("--key-prefix", "key_prefix"),
            ("--arg-match", "arg_matches"),
            ("--all", "everything"),
        )
        if given[key] not in (None, (), False)
    ]
    if ids and named:
        raise Refused(f"give task ids or a filter ({', '.join(named)}), not both")
    if not ids and not named:
        raise Refused(
            f"no task named: give task ids, a filter ({FILTER_FLAGS}), or --all for every task"
        )
    return bool(named)


@click.command("disable")
@bulk_options
@pass_cli
def disable(cli: CliContext, ids: tuple[int, ...], **given: Any) -> None:
    """Take tasks out of scheduling (a running one finishes): task ids, or
    every task a filter matches (counted, shown, then confirmed)."""
    if _filtered(ids, given) or given["dry_run"]:
        _by_filter(cli, BulkAction.DISABLE, ids, given)
    else:
        _require(cli, ids)
        changed = cli.store.disable_tasks(list(ids), now=now())
        _act(cli, "disable", ids, changed, given["as_json"])


@click.command("enable")
@bulk_options
@pass_cli
def enable(cli: CliContext, ids: tuple[int, ...], **given: Any) -> None:
    """Put disabled tasks back into scheduling: task ids, or every task a
    filter matches (counted, shown, then confirmed)."""
    if _filtered(ids, given) or given["dry_run"]:
        _by_filter(cli, BulkAction.ENABLE, ids, given)
    else:
        _require(cli, ids)
        changed = cli.store.enable_tasks(list(ids), now=now())
        _act(cli, "enable", ids, changed, given["as_json"])


@click.command("cancel")
@bulk_options
@click.option(
    "--broker-url",
    envvar="SWH_SCHEDULER_BROKER_URL",
    show_envvar=True,
    help="Celery broker the revoke goes through (default: from celeryconfig).",
)
@pass_cli
def cancel(cli: CliContext, ids: tuple[int, ...], broker_url: str | None, **given: Any) -> None:
    """Cancel tasks (task ids, or every task a filter matches: counted,
    shown, then confirmed): a dispatched run is revoked and never runs
    (workers refuse it at start even if they missed the revoke); a running
    leased run stops at its next ping; a running plain run finishes."""
    revoke = _revoker(cli, broker_url)
    if _filtered(ids, given) or given["dry_run"]:
        _by_filter(cli, BulkAction.CANCEL, ids, given, lambda report: revoke(list(report.revoke)))
        return
    _require(cli, ids)
    cancelled = cli.store.cancel_tasks(list(ids), now=now())
    runs = [r for t in cancelled for r in cli.store.get_task_runs(t.id or 0, limit=1)]
    revoke([r.backend_id for r in runs if r.status is RunStatus.CANCELLED and not r.started])
    _act(cli, "cancel", ids, cancelled, given["as_json"])


def _revoker(cli: CliContext, broker_url: str | None) -> Callable[[list[str]], None]:
    """Revoke runs on the broker (the app is made at the first runs to revoke)."""
    apps: list[Any] = []

    def revoke(backend_ids: list[str]) -> None:
        if not backend_ids:
            return
        from ..broker.revoke import revoke_runs
        from ..plumbing.celery_factory import make_app

        if not apps:
            url = broker_url or cli.settings.broker_url
            apps.append(make_app(broker_url=url, load_workers=False))
        error = revoke_runs(apps[0], backend_ids)
        if error is not None:
            click.echo(
                f"warning: could not revoke {len(backend_ids)} dispatched run(s) ({error}); "
                "workers will refuse them at start",
                err=True,
            )

    return revoke


@click.command("delete")
@bulk_options
@pass_cli
def delete(cli: CliContext, ids: tuple[int, ...], **given: Any) -> None:
    """Delete tasks and their runs: task ids, or every task a filter matches
    (counted, shown, then confirmed, as ids are). A task with an open run
    (dispatched or running) is kept: cancel it first."""
    _filtered(ids, given)
    _by_filter(cli, BulkAction.DELETE, ids, given)


__all__ = ["cancel", "delete", "disable", "enable", "run_bulk"]
