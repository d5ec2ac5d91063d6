"""``swh scheduler job …``: jobs by key (seed 004), as ``PUT/GET/DELETE /jobs/KEY``."""

from __future__ import annotations

import json
from typing import IO, Any

import click

from ..domain.exceptions import InvalidInput, NotFound
from ..intake.jobs import JobView, job_from_input
from .base import CliContext, emit_json, now, pass_cli, say

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _show(view: JobView, as_json: bool, heading: str | None = None) -> None:
    if as_json:
        emit_json(view.to_dict())
        return
    if heading:
        click.echo(heading)
    say(f"Job {view.key}")
    for instant in view.to_dict()["instants"]:
        run = instant["run"]
        outcome = f", run {run['status']}" if run else ""
        say(f"  {instant['at']}  {instant['state']:<10} task {instant['task_id']}{outcome}")


@click.command("put")
@click.argument("key")
@click.option(
    "--file",
    "-f",
    "body_file",
    type=click.File("r", encoding="utf-8"),
    help="The job as seed 004's JSON body (key, schedules, callback); '-' reads stdin.",
)
@click.option("--at", "instants", multiple=True, metavar="INSTANT", help="ISO 8601 (repeatable).")
@click.option("--queue", help="rabbitmq callback: the queue the payload is published to.")
@click.option("--url", help="http callback: the URL the payload is posted to.")
@click.option("--payload", default="{}", show_default=True, help="The payload (a JSON object).")
@click.option("--max-delay", help="How late an instant may still run.")
@json_option
@pass_cli
def put(
    cli: CliContext,
    key: str,
    body_file: IO[str] | None,
    instants: tuple[str, ...],
    queue: str | None,
    url: str | None,
    payload: str,
    max_delay: str | None,
    as_json: bool,
) -> None:
    """Create job KEY or replace its instants (one that already ran does not
    run again; those left out that have not started are cancelled)."""
    body = _body(body_file, instants, queue, url, payload, max_delay)
    job = job_from_input(key, body, reach=cli.settings.callback_allow)
    view = cli.store.put_job(job, now=now())
    added, removed, kept = len(view.added), len(view.removed), len(view.kept)
    _show(view, as_json, f"Added {added}, removed {removed}, kept {kept} instant(s)")


def _body(
    body_file: IO[str] | None,
    instants: tuple[str, ...],
    queue: str | None,
    url: str | None,
    payload: str,
    max_delay: str | None,
) -> dict[str, Any]:
    if body_file is not None:
        if instants or queue or url:
            raise InvalidInput("file", "give the job as a file or with options, not both")
        try:
            given = json.load(body_file)
        except json.JSONDecodeError as exc:
            raise InvalidInput("file", f"is not JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(given, dict):
            raise InvalidInput("file", "must hold a JSON object")
        return given
    if (queue is None) == (url is None):
        raise InvalidInput("callback", "give --queue (rabbitmq) or --url (http), or --file")
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise InvalidInput("payload", f"is not JSON ({exc.msg})") from None
    callback: dict[str, Any] = (
        {"type": "rabbitmq", "data": {"queue": queue, "payload": data}}
        if queue is not None
        else {"type": "http", "data": {"url": url, "payload": data}}
    )
    body: dict[str, Any] = {"schedules": list(instants), "callback": callback}
    if max_delay is not None:
        body["max_delay"] = max_delay
    return body


@click.command("get")
@click.argument("key")
@json_option
@pass_cli
def get(cli: CliContext, key: str, as_json: bool) -> None:
    """Every instant of job KEY, with its state and latest run."""
    view = cli.store.get_job(key)
    if view is None:
        raise NotFound(f"no job with key {key!r}")
    _show(view, as_json)


@click.command("delete")
@click.argument("key")
@json_option
@pass_cli
def delete(cli: CliContext, key: str, as_json: bool) -> None:
    """Cancel the instants of job KEY that have not run (the history stays)."""
    view = cli.store.delete_job(key, now=now())
    if view is None:
        raise NotFound(f"no job with key {key!r}")
    _show(view, as_json, f"Cancelled {len(view.removed)} instant(s)")
