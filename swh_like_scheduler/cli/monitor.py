"""``swh scheduler start-monitor``: the monitor's duties (the steal protocol)."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import timedelta

import click

from .base import CliContext, emit_json, pass_cli, scheduler


@scheduler.command("start-monitor")
@click.option("--once", is_flag=True, help="Do one pass, print what was done, and exit.")
@click.option(
    "--period",
    type=click.FloatRange(min=0.01),
    default=10.0,
    show_default=True,
    help="Seconds between two passes.",
)
@click.option(
    "--ping-timeout",
    type=click.FloatRange(min=0.01),
    default=30.0,
    show_default=True,
    help="Seconds without a ping after which a lease's owner is put on notice "
    "(steal_start_at is set).",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0.01),
    default=30.0,
    show_default=True,
    help="Seconds the owner then has to ping again before its run is lost and "
    "the task runnable again.",
)
@click.option("--json", "as_json", is_flag=True, help="With --once: print the report as JSON.")
@pass_cli
def start_monitor(
    cli: CliContext, once: bool, period: float, ping_timeout: float, grace: float, as_json: bool
) -> None:
    """Steal the leases of workers that stopped pinging (run exactly one monitor)."""
    from ..monitor import MonitorSettings, monitor_loop

    settings = MonitorSettings(
        ping_timeout=timedelta(seconds=ping_timeout),
        grace=timedelta(seconds=grace),
        period=timedelta(seconds=period),
    )
    store = cli.store
    if once:
        report = monitor_loop(store, settings, once=True)
        assert report is not None
        stolen = [r.backend_id for r in report.steal.stolen]
        if as_json:
            emit_json({"warned": list(report.steal.warned), "stolen": stolen})
        else:
            click.echo(
                f"{len(report.steal.warned)} lease(s) put on notice, {len(stolen)} run(s) lost"
            )
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    monitor_loop(store, settings, stop=stop)
