"""``swh scheduler lister …`` and ``swh scheduler origin …``: listers, the
origins they list, and what visits of them found (:mod:`..visits`).

A file is read twice: every line is checked first, by the rules its write
applies (storable text, JSON numbers, the url schemes of the setting
``[visits] origin_schemes``...), and nothing is written unless all of them
are right (a bad line is named by its number, an unreadable one too: not
UTF-8, not JSON, nested too deep, longer than
:data:`~..visits.lines.MAX_LINE_BYTES`); then it is written in batches,
each in one transaction. Writing is idempotent: a run cut short is
finished by running it again."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import click

from ..domain.exceptions import InvalidInput, NotFound
from ..domain.text import plural
from ..visits.intake import (
    LISTED_KNOWN,
    lister_of,
    origin_from_input,
    status_from_input,
    unknown_lister,
)
from ..visits.lines import json_lines
from ..visits.model import (
    ListedOrigin,
    Lister,
    origin_scheme,
    origin_url,
    visit_task_type,
    visit_type_name,
)
from .base import CliContext, emit_json, now, pass_cli, say

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
#: lines written per transaction
BATCH = 1000


def _lister_json(lister: Lister) -> dict[str, Any]:
    return dict(vars(lister))


@click.command("add")
@click.argument("name")
@click.option("--instance", "instance_name", default="", help="The forge instance (framagit).")
@json_option
@pass_cli
def lister_add(cli: CliContext, name: str, instance_name: str, as_json: bool) -> None:
    """Register lister NAME (nothing changes if it exists); print its id."""
    found = cli.store.get_or_create_lister(name, instance_name, now=now())
    if as_json:
        emit_json(_lister_json(found))
        return
    say(f"Lister {found.name} {found.instance_name or '-'}: {found.id}")


@click.command("list")
@json_option
@pass_cli
def lister_list(cli: CliContext, as_json: bool) -> None:
    """Every lister, with when it last finished a listing."""
    listers = cli.store.get_listers()
    if as_json:
        emit_json([_lister_json(x) for x in listers])
        return
    for x in listers:
        finished = x.last_listing_finished_at.isoformat() if x.last_listing_finished_at else "never"
        say(f"{x.id}  {x.name:<16} {x.instance_name or '-':<16} last listing: {finished}")
    click.echo(f"{plural(len(listers), 'lister')}")


@contextmanager
def _seekable(file: IO[bytes]) -> Iterator[IO[bytes]]:
    """``file``, read from its start each time it is asked; stdin is
    spooled first (to a temporary file, in chunks)."""
    if file.seekable():
        yield file
        return
    with tempfile.TemporaryFile("w+b") as copy:
        shutil.copyfileobj(file, copy)
        yield copy


def _lines(file: IO[bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line's object, read bounded (:func:`..visits.lines.json_lines`)."""
    file.seek(0)
    yield from json_lines(file)


def _checked(number: int, check: Any, *args: Any) -> Any:
    try:
        return check(*args)
    except InvalidInput as error:
        raise InvalidInput(error.field, error.message, line=number) from None


def _require_listers(cli: CliContext, wanted: dict[tuple[str, str], int]) -> None:
    """Refuse a lister of ``wanted`` (by the line first naming it) that is
    not registered, saying how to create it."""
    found = unknown_lister(wanted, cli.store.get_listers())
    if found is None:
        return
    line, name, instance, message = found
    create = f"swh scheduler lister add {name}" + (f" --instance {instance}" if instance else "")
    raise InvalidInput(
        "lister_name",
        f"{message} Create it with `{create}`, or record with --create-lister.",
        line=line,
    )


def _check_origin(
    number: int, raw: dict[str, Any], known: set[str], schemes: frozenset[str]
) -> ListedOrigin:
    """The origin of line ``number`` checked by the rules its write applies
    (the store's own: a visit type with its task type, the url schemes)."""
    parsed: ListedOrigin = _checked(number, origin_from_input, raw, "-")
    if visit_task_type(parsed.visit_type) not in known:
        raise InvalidInput(
            "visit_type",
            f"{parsed.visit_type!r} is not a known visit type: no task type "
            f"{visit_task_type(parsed.visit_type)!r} is registered",
            line=number,
        )
    _checked(number, origin_scheme, "url", parsed.url, schemes)
    if parsed.forked_from_url is not None:
        _checked(number, origin_scheme, "forked_from_url", parsed.forked_from_url, schemes)
    return parsed


@click.command("record")
@click.argument("file", type=click.File("rb"))
@click.option(
    "--create-lister",
    is_flag=True,
    help="Create the listers the lines name that are not registered (default: refuse them, "
    "a mistyped name would make a new lister).",
)
@json_option
@pass_cli
def origin_record(cli: CliContext, file: IO[bytes], create_lister: bool, as_json: bool) -> None:
    """Record the listed origins of FILE (JSON lines: lister_name,
    lister_instance_name, url, visit_type, last_update, extra_loader_arguments,
    enabled, is_fork). Their listers must be registered (`lister add`)
    unless --create-lister is given."""
    started = time.monotonic()
    known = {t.type for t in cli.store.get_task_types()}
    schemes = cli.settings.visits.origin_schemes
    with _seekable(file) as source:
        listers: dict[tuple[str, str], int] = {}
        total = 0
        for number, raw in _lines(source):
            names = _checked(number, lister_of, raw)
            listers.setdefault(names, number)
            _check_origin(number, raw, known, schemes)
            total += 1
        if not create_lister:
            _require_listers(cli, listers)
        at = now()
        ids = {n: str(cli.store.get_or_create_lister(*n, now=at).id) for n in sorted(listers)}
        batch: list[Any] = []
        with click.progressbar(
            length=total, label="Recording", file=sys.stderr, hidden=as_json or not total
        ) as bar:
            for _, raw in _lines(source):
                batch.append(origin_from_input(raw, ids[lister_of(raw)]))
                if len(batch) >= BATCH:
                    cli.store.record_listed_origins(batch, now=at)
                    bar.update(len(batch))
                    batch = []
            if batch:
                cli.store.record_listed_origins(batch, now=at)
                bar.update(len(batch))
    elapsed = time.monotonic() - started
    if as_json:
        emit_json({"recorded": total, "listers": sorted(ids.values()), "seconds": elapsed})
        return
    click.echo(
        f"Recorded {plural(total, 'listed origin')} of {plural(len(ids), 'lister')} "
        f"in {elapsed:.1f} s"
    )


@click.command("record-visit-status")
@click.argument("file", type=click.File("rb"))
@json_option
@pass_cli
def origin_record_visit_status(cli: CliContext, file: IO[bytes], as_json: bool) -> None:
    """Apply the visit statuses of FILE (JSON lines, the journal's message:
    origin, visit_type, date, status, snapshot) to the visit statistics."""
    changed = ignored = 0
    with _seekable(file) as source:
        for number, raw in _lines(source):
            _checked(number, status_from_input, raw)
        batch = []
        for _, raw in _lines(source):
            batch.append(status_from_input(raw))
            if len(batch) >= BATCH:
                moved, kept = cli.store.record_visit_statuses(batch)
                changed, ignored, batch = changed + moved, ignored + kept, []
        if batch:
            moved, kept = cli.store.record_visit_statuses(batch)
            changed, ignored = changed + moved, ignored + kept
    if as_json:
        emit_json({"changed": changed, "ignored": ignored})
        return
    click.echo(
        f"Applied {plural(changed, 'visit status', 'visit statuses')}; "
        f"{ignored} changed nothing (unfinished, older than the last visit, or repeated)"
    )


@click.command("visit-stats")
@click.argument("url")
@click.argument("visit_type")
@json_option
@pass_cli
def origin_visit_stats(cli: CliContext, url: str, visit_type: str, as_json: bool) -> None:
    """What the visits of URL with VISIT_TYPE found."""
    key = (origin_url("url", url), visit_type_name("visit_type", visit_type))
    found = cli.store.origin_visit_stats_get([key])
    if not found:
        raise NotFound(f"no visit of {url} ({visit_type}) was recorded")
    values = {k: (v.value if hasattr(v, "value") else v) for k, v in vars(found[0]).items()}
    if as_json:
        emit_json(values)
        return
    for name, value in values.items():
        shown = value.isoformat() if hasattr(value, "isoformat") else value
        say(f"{name + ':':<28}{'-' if shown is None else shown}")


def _require_lister_id(cli: CliContext, lister_id: str | None) -> None:
    """Refuse a ``--lister-id`` of no lister (a mistyped id would give an
    empty answer, as if the lister had nothing), naming the registered
    listers when they are few."""
    if lister_id is None:
        return
    listers = cli.store.get_listers()
    if any(x.id == lister_id for x in listers):
        return
    message = f"no lister with id {lister_id!r}."
    if not listers:
        message += " No lister is registered yet."
    elif len(listers) <= LISTED_KNOWN:
        named = ", ".join(f"{x.name} {x.instance_name or '-'}: {x.id}" for x in listers)
        message += f" Registered: {named}."
    else:
        message += f" {len(listers)} listers are registered (`swh scheduler lister list`)."
    raise InvalidInput("lister-id", message)


def _metrics_table(metrics: list[Any], as_json: bool) -> None:
    if as_json:
        emit_json([vars(m) for m in metrics])
        return
    # never: no successful visit (the reference's origins_never_visited);
    # untried: no visit ended at all (origins_never_attempted)
    columns = ("known", "enabled", "never", "untried", "pending", "OK", "WARNING", "ERROR")
    click.echo(f"{'lister':<34}{'type':<10}" + "".join(f"{c:>9}" for c in columns))
    for m in metrics:
        counts = (
            m.origins_known,
            m.origins_enabled,
            m.origins_never_visited,
            m.origins_never_attempted,
            m.origins_with_pending_changes,
            m.origins_ok,
            m.origins_warning,
            m.origins_error,
        )
        say(f"{m.lister_id:<34}{m.visit_type:<10}" + "".join(f"{c:>9}" for c in counts))


@click.command("update-metrics")
@click.option("--lister-id", help="This lister only.")
@json_option
@pass_cli
def origin_update_metrics(cli: CliContext, lister_id: str | None, as_json: bool) -> None:
    """Count, per lister and visit type, the origins known, enabled, never
    visited and with pending changes; store and print the counts."""
    _require_lister_id(cli, lister_id)
    _metrics_table(cli.store.update_metrics(lister_id, now=now()), as_json)


@click.command("metrics")
@click.option("--lister-id", help="This lister only.")
@click.option("--visit-type", help="This visit type only.")
@json_option
@pass_cli
def origin_metrics(
    cli: CliContext, lister_id: str | None, visit_type: str | None, as_json: bool
) -> None:
    """The counts the last ``origin update-metrics`` stored."""
    _require_lister_id(cli, lister_id)
    _metrics_table(cli.store.get_metrics(lister_id, visit_type), as_json)


def _next_visits(
    cli: CliContext,
    grab: bool,
    visit_type: str,
    count: int,
    policy: str,
    lister_id: str | None,
    as_json: bool,
) -> None:
    _require_lister_id(cli, lister_id)
    method = cli.store.grab_next_visits if grab else cli.store.peek_next_visits
    chosen = method(
        visit_type,
        count,
        policy,
        now=now(),
        lister_id=lister_id,
        cooldowns=cli.settings.visits.cooldowns,
    )
    if as_json:
        emit_json([{"url": o.url, "visit_type": o.visit_type, **_origin_json(o)} for o in chosen])
        return
    for o in chosen:
        say(o.url)
    click.echo(
        f"{plural(len(chosen), 'origin')} {'marked scheduled' if grab else 'would be visited'}",
        err=True,
    )


def _origin_json(origin: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(origin).items() if k not in ("url", "visit_type")}


_policy_choice = click.option(
    "--policy",
    required=True,
    help="oldest_scheduled_first, never_visited_oldest_update_first, "
    "already_visited_order_by_lag, origins_without_last_update, stop_after_success, "
    "first_visits_after_listing (with --lister-id), deadline.",
)


def _next_command(name: str, grab: bool, doc: str) -> click.Command:
    @click.argument("visit_type")
    @click.argument("count", type=click.IntRange(0, 10_000))
    @_policy_choice
    @click.option("--lister-id", help="That lister's origins only.")
    @json_option
    @pass_cli
    def command(
        cli: CliContext,
        visit_type: str,
        count: int,
        policy: str,
        lister_id: str | None,
        as_json: bool,
    ) -> None:
        _next_visits(cli, grab, visit_type, count, policy, lister_id, as_json)

    command.__doc__ = doc
    return click.command(name)(command)


peek_next = _next_command(
    "peek-next",
    False,
    """The next COUNT origins of VISIT_TYPE the policy would visit, in its
    order (nothing is written).""",
)
grab_next = _next_command(
    "grab-next",
    True,
    """As peek-next, and mark them scheduled (for a scheduler of your own
    that sends the visits itself).""",
)
