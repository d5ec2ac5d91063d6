"""``swh scheduler start-runner``: the dispatching daemon."""

from __future__ import annotations

import dataclasses
import signal
import threading
from typing import Any

import click

from ..domain.exceptions import UnknownTaskType
from ..domain.model import RUNNER_ORDER, DispatchOrder, Priority
from ..store.session import daemon_pool
from .base import CliContext, emit_json, pass_cli
from .daemon import app_options, metrics_options, serve_metrics, start_daemon
from .monitor import monitor_options, monitor_settings, republish_delay

#: a runner that serves only the high class polls more often
HIGH_PRIORITY_PERIOD = 5.0


@click.command("start-runner")
@click.option(
    "--type",
    "-t",
    "types",
    multiple=True,
    metavar="TYPE",
    help="Serve only these task types (repeatable; each must exist; default all).",
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
    "--claimers",
    type=click.IntRange(min=1, max=16),
    help="Claims run at once, each in its own transaction and connection "
    "(PostgreSQL; SQLite claims one chunk at a time). Default: 2.",
)
@click.option(
    "--dispatch-order",
    type=click.Choice([o.value for o in DispatchOrder]),
    default=RUNNER_ORDER.value,
    show_default=True,
    help="Order of the ready tasks within a priority class: deadline (closest to "
    "breaking its promise first), triage (the tasks due within 30 min or late "
    "first, those whose run keeps them OK the longest first, then the others by "
    "deadline; each claim sorts the tasks due), fifo (earliest can_start_by "
    "first, as swh-scheduler's runner and Celery beat) or random. `swh scheduler "
    "simulate` compares them.",
)
@app_options(broker_help="Celery broker the tasks are sent to")
@metrics_options
@click.option(
    "--republish-after",
    default="5 min",
    show_default=True,
    help="Send again the messages of runs dispatched this long ago that never started "
    "('0' disables). A monitor duty: done by the runner holding the monitor lock "
    "(with --no-monitor, by `start-monitor`).",
)
@click.option(
    "--monitor/--no-monitor",
    default=True,
    show_default=True,
    help="Take turns at the monitor's duties: each pass tries the monitor lock, and "
    "exactly one of the runners (or start-monitor processes) does them.",
)
@click.option(
    "--monitor-period",
    type=click.FloatRange(min=0.01),
    default=10.0,
    show_default=True,
    help="Seconds between two monitor passes (the runner wakes up for them).",
)
@monitor_options
@click.option("--json", "as_json", is_flag=True, help="With --once: print the report as JSON.")
@pass_cli
def start_runner(
    cli: CliContext,
    types: tuple[str, ...],
    priorities: tuple[str, ...],
    period: float | None,
    once: bool,
    claimers: int | None,
    dispatch_order: str,
    app_spec: str | None,
    broker_url: str | None,
    metrics_port: int | None,
    metrics_host: str,
    republish_after: str,
    monitor: bool,
    monitor_period: float,
    as_json: bool,
    **monitor_options: Any,
) -> None:
    """Claim ready tasks by deadline and publish them to their Celery queues."""
    from ..dispatch import tick
    from ..dispatch.routing import LiveWorkers
    from ..dispatch.serve import CLAIMERS
    from ..monitor.duties import monitor_tick, release
    from ..runner import loop
    from ..runner.interpreter import tune_interpreter
    from ..runner.wakeup import waker_for
    from ..store.clock import DatabaseClock

    app = start_daemon(cli, "start-runner", app_spec=app_spec, broker_url=broker_url).app
    chosen = [Priority(p) for p in priorities] or None
    if period is None:
        period = HIGH_PRIORITY_PERIOD if chosen == [Priority.HIGH] else 60.0
    type_list = list(types) or None
    claimers = claimers or CLAIMERS
    tune_interpreter()
    settings = (
        monitor_settings(
            monitor_options,
            period=monitor_period,
            republish_after=republish_delay(republish_after),
            period_option="--monitor-period",
        )
        if monitor
        else None
    )
    cli.pool = daemon_pool("runner", claimers=claimers)
    store = cli.scheduling_store("start-runner")
    for name in types:  # a typo would serve nothing, for ever
        if store.get_task_type(name) is None:
            raise UnknownTaskType(name)
    index = cli.index()
    keeper = None
    if index is not None:
        from ..index.keeper import IndexKeeper

        keeper = IndexKeeper(index, store, background=not once)
    clock = DatabaseClock(store, role="runner")
    if once:
        workers = LiveWorkers(app)
        report = tick(
            store,
            app,
            clock.now(),
            types=type_list,
            priorities=chosen,
            workers=workers,
            claimers=claimers,
            order=DispatchOrder(dispatch_order),
            index=keeper,
            slots=workers.slots,
        )
        duties = None
        if settings is not None:
            try:
                duties = monitor_tick(
                    store, clock.now(), settings=settings, app=app, workers=workers, index=keeper
                )
            finally:
                release(store, settings)
        if as_json:
            data = _report_json(report)
            data["monitor"] = duties.to_json() if duties is not None else None
            emit_json(data)
        else:
            for t in report.types:
                click.echo(
                    f"{t.task_type}: depth {t.depth} capacity {t.capacity} claimed "
                    f"{t.claimed} published {t.published}"
                    + (f" error: {t.error}" if t.error else "")
                )
            if duties is not None:
                click.echo(f"monitor: {duties.summary()}")
        if report.errors:
            raise click.exceptions.Exit(1)
        return
    serve_metrics(metrics_port, metrics_host)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    waker = waker_for(cli.sql_store("start-runner").engine, stop)
    try:
        steps = loop.RunnerLoop(
            store,
            app,
            period=period,
            types=type_list,
            priorities=chosen,
            workers=LiveWorkers(app),
            monitor=settings,
            claimers=claimers,
            order=DispatchOrder(dispatch_order),
            index=keeper,
            clock=clock.now,
        )
        loop.run(steps, waker, stop=stop)
    finally:
        waker.close()


def _report_json(report: Any) -> dict[str, Any]:
    data = dataclasses.asdict(report)
    data["claimed"] = report.claimed
    data["published"] = report.published
    return data
