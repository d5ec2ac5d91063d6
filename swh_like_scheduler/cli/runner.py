"""``swh scheduler start-runner``: the dispatching daemon."""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
from typing import Any

import click

from ..model import Priority
from ..validation import parse_duration
from .base import CliContext, emit_json, now, pass_cli, scheduler

#: a runner that serves only the high class polls more often
HIGH_PRIORITY_PERIOD = 5.0


@scheduler.command("start-runner")
@click.option(
    "--type",
    "-t",
    "types",
    multiple=True,
    metavar="TYPE",
    help="Serve only these task types (repeatable; default all).",
)
@click.option(
    "--priority",
    "-P",
    "priorities",
    multiple=True,
    type=click.Choice([p.value for p in Priority]),
    help="Serve only these priority classes (e.g. a dedicated `-P high` runner).",
)
@click.option(
    "--period",
    type=click.FloatRange(min=0.1),
    help="Longest sleep between passes, seconds (default 60; 5 with -P high only).",
)
@click.option("--once", is_flag=True, help="Run one pass, print what it did, and exit.")
@click.option(
    "--broker-url",
    envvar="SWH_SCHEDULER_BROKER_URL",
    show_envvar=True,
    help="Celery broker (default: from celeryconfig).",
)
@click.option("--metrics-port", type=int, help="Serve Prometheus metrics on this port.")
@click.option(
    "--republish-after",
    default="5 min",
    show_default=True,
    help="Send again the messages of runs dispatched this long ago that never started "
    "('0' disables).",
)
@click.option("--json", "as_json", is_flag=True, help="With --once: print the report as JSON.")
@pass_cli
def start_runner(
    cli: CliContext,
    types: tuple[str, ...],
    priorities: tuple[str, ...],
    period: float | None,
    once: bool,
    broker_url: str | None,
    metrics_port: int | None,
    republish_after: str,
    as_json: bool,
) -> None:
    """Claim ready tasks by deadline and publish them to their Celery queues."""
    from ..celery_factory import make_app
    from ..runner import loop, tick
    from ..runner.republish import republish_unstarted
    from ..runner.routing import LiveWorkers
    from ..runner.wakeup import waker_for

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    app = make_app(broker_url=broker_url or cli.settings.broker_url, load_workers=False)
    chosen = [Priority(p) for p in priorities] or None
    if period is None:
        period = HIGH_PRIORITY_PERIOD if chosen == [Priority.HIGH] else 60.0
    type_list = list(types) or None
    republish = parse_duration("republish-after", republish_after) or None
    if once:
        workers = LiveWorkers(app)
        report = tick(cli.store, app, now(), types=type_list, priorities=chosen, workers=workers)
        if republish is not None:
            republish_unstarted(cli.store, app, now(), older_than=republish, workers=workers)
        if as_json:
            emit_json(_report_json(report))
        else:
            for t in report.types:
                click.echo(
                    f"{t.task_type}: depth {t.depth} capacity {t.capacity} claimed "
                    f"{t.claimed} published {t.published}"
                    + (f" error: {t.error}" if t.error else "")
                )
        if report.errors:
            raise click.exceptions.Exit(1)
        return
    if metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(metrics_port)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    waker = waker_for(cli.store.engine, stop)
    try:
        loop.run(
            cli.store,
            app,
            waker,
            period=period,
            stop=stop,
            types=type_list,
            priorities=chosen,
            workers=LiveWorkers(app),
            republish_after=republish,
        )
    finally:
        waker.close()


def _report_json(report: Any) -> dict[str, Any]:
    data = dataclasses.asdict(report)
    data["claimed"] = report.claimed
    data["published"] = report.published
    return data
