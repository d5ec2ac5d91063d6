"""``swh scheduler backtest``: the recorded forecasts against what happened
(:mod:`..simulator.backtest`)."""

from __future__ import annotations

from typing import Any

import click

from .base import CliContext, emit_json, pass_cli


@click.command("backtest")
@click.option(
    "--limit",
    type=click.IntRange(1, 24),
    default=5,
    show_default=True,
    help="How many of the latest recorded forecasts to check.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@pass_cli
def backtest(cli: CliContext, limit: int, as_json: bool, **_: Any) -> None:
    """Set the forecasts recorded last ('swh scheduler forecast --record')
    beside what happened: the tasks in ERROR per type as the monitor's
    census counted them (its last hours are kept), against the forecast's
    sample in force at each census: the mean and largest difference, and
    both counts at the last census of the horizon. Reads only."""
    from ..simulator.backtest import Backtest, backtests, lines

    found = backtests(cli.store, limit=limit)
    if as_json:
        emit_json(
            [
                item.to_json()
                if isinstance(item, Backtest)
                else {"forecast_id": item.id, "unreadable": True}
                for item in found
            ]
        )
        return
    for line in lines(found):
        click.echo(line)
