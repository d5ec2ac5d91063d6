"""``swh scheduler console-link``: a one-time login link to the console."""

from __future__ import annotations

import click

from ..config.settings import ENV_PREFIX
from ..domain.exceptions import InvalidInput, StoreError, StoreUnavailable
from .base import CliContext, emit_json, pass_cli

#: the server asked when neither --url nor an http --db-url names one
DEFAULT_SERVER = "http://127.0.0.1:5008"


@click.command("console-link")
@click.option(
    "--url",
    envvar=f"{ENV_PREFIX}_API_URL",
    show_envvar=True,
    help=f"The server (rpc-serve). Default: --db-url when it is http(s)://…, else "
    f"{DEFAULT_SERVER}.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the link as JSON.")
@pass_cli
def console_link(cli: CliContext, url: str | None, as_json: bool) -> None:
    """Print a one-time login link to the console: it opens one session with
    the access of --api-token (SWH_SCHEDULER_API_TOKEN), within 10 minutes,
    and is worthless after. The link does not hold the token."""
    import httpx

    db_url = cli.settings.db_url or ""
    server = url or (db_url if db_url.startswith(("http://", "https://")) else DEFAULT_SERVER)
    server = server.rstrip("/")
    if not server.startswith(("http://", "https://")):
        raise InvalidInput("url", f"{server!r} is not an http:// or https:// URL")
    token = cli.settings.api_token
    if not token:
        raise InvalidInput(
            "api_token",
            f"is needed to make a link: give a token of the server with --api-token or "
            f"{ENV_PREFIX}_API_TOKEN (the link gets its access)",
        )
    try:
        answer = httpx.post(
            f"{server}/console/links", headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
    except httpx.HTTPError as exc:
        raise StoreUnavailable(f"{server}: {type(exc).__name__}: {exc}") from None
    if answer.status_code == 401:
        raise InvalidInput("api_token", f"is not a token of the server at {server}")
    if answer.status_code != 201:
        raise StoreError(f"{server}: HTTP {answer.status_code}: {answer.text[:300]}")
    link = answer.json()
    if as_json:
        emit_json(link)
        return
    click.echo(link["url"])
    click.echo(f"({link['access']}; opens one session, until {link['expires_at']})", err=True)
