"""``swh scheduler start-listener``: Celery events into run history."""

from __future__ import annotations

import logging
import random
import signal
import threading
from datetime import timedelta
from typing import Any

import click

from ..domain.exceptions import InvalidInput
from ..domain.text import plural
from ..plumbing.quietlog import QuietLog
from .base import CliContext, emit_json, pass_cli
from .daemon import app_options, metrics_options, serve_metrics, start_daemon

logger = logging.getLogger(__name__)


@click.command("start-listener")
@app_options(broker_help="Celery broker whose events are read")
@click.option(
    "--once",
    is_flag=True,
    help="Apply the events already queued, print what was done, and exit.",
)
@click.option(
    "--queue-name",
    help="Event queue to read. Listeners with the same name share the events "
    "(durable on RabbitMQ: events wait there while no listener runs). Default: "
    "celeryev.swh-scheduler-listener.<installation>, named after the id stored "
    "in the database (`swh scheduler db identity`), so that two installations on "
    "one broker never share it. Earlier versions read "
    "celeryev.swh-scheduler-listener: give that name to keep it.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Events written per batch at most.",
)
@click.option(
    "--batch-wait",
    type=click.FloatRange(min=0.0),
    default=0.2,
    show_default=True,
    help="Longest wait, in seconds, before a partial batch is written.",
)
@click.option(
    "--catch-up-every",
    type=click.FloatRange(min=0.0),
    default=60.0,
    show_default=True,
    help="Record runs whose events were missed from the result backend at start, "
    "then every this many seconds (0: never; needs a result backend).",
)
@click.option(
    "--catch-up-delay",
    type=click.FloatRange(min=0.0),
    default=60.0,
    show_default=True,
    help="Leave runs dispatched less than this many seconds ago to their events.",
)
@click.option(
    "--summary-every",
    type=click.FloatRange(min=0.0),
    default=60.0,
    show_default=True,
    help="Log the events received, applied (by what they did) and dropped (by why) "
    "every this many seconds (0: never).",
)
@click.option(
    "--enable-events/--no-enable-events",
    default=True,
    show_default=True,
    help="Ask the workers to send task events (Celery's enable_events, as Flower does) "
    "at start, every --enable-events-every seconds and whenever a worker that has not "
    "answered is seen: a worker started without -E is then recorded like the others. "
    "Either way, a worker seen taking tasks without sending task events is named in a "
    "warning, and the runs it may have taken are not published again while it lives.",
)
@click.option(
    "--enable-events-every",
    type=click.FloatRange(min=1.0),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between two requests to every worker to send task events.",
)
@metrics_options
@click.option("--json", "as_json", is_flag=True, help="With --once: print the counts as JSON.")
@pass_cli
def start_listener(
    cli: CliContext,
    app_spec: str | None,
    broker_url: str | None,
    once: bool,
    queue_name: str | None,
    batch_size: int,
    batch_wait: float,
    catch_up_every: float,
    catch_up_delay: float,
    summary_every: float,
    enable_events: bool,
    enable_events_every: float,
    metrics_port: int | None,
    metrics_host: str,
    as_json: bool,
) -> None:
    """Record what the workers report (Celery events) as runs, statistics and
    the next run times of tasks."""
    from ..listener import EventHandler, Listener, ListenerOptions, catch_up
    from ..listener.blind import BlindWatch
    from ..listener.clocks import WorkerClocks
    from ..listener.switch import EventSwitch
    from ..store.clock import DatabaseClock

    if queue_name is not None and not queue_name.strip():
        raise InvalidInput("queue-name", "must not be empty (leave it out for the installation's)")
    app = start_daemon(cli, "start-listener", app_spec=app_spec, broker_url=broker_url).app
    store = cli.scheduling_store("start-listener")
    rng = random.Random()
    handler = EventHandler(store, rng=rng)
    # the workers' instants onto the database's clock, which decides
    clock = DatabaseClock(store, role="listener")
    handler.clocks, handler.clock = WorkerClocks(), clock.now
    options = ListenerOptions(
        queue_name=queue_name,
        batch_size=batch_size,
        batch_wait=batch_wait,
        summary_every=summary_every,
    )
    stop = threading.Event()
    listener = Listener(app, store, rng=rng, options=options, stop=stop, handler=handler)
    delay = timedelta(seconds=catch_up_delay)
    if once:
        stats = listener.run(once=True)
        report = catch_up(store, app, older_than=clock.now() - delay, handler=handler)
        counts: dict[str, Any] = {str(k): v for k, v in sorted(stats.applied.counts.items())}
        summary = {
            "received": stats.received,
            "batches": stats.batches,
            "applied": counts,
            "caught_up": report.recorded if report.backend else None,
        }
        if as_json:
            emit_json(summary)
        else:
            click.echo(
                f"received {stats.received} events in {stats.batches} batches: "
                + (", ".join(f"{k} {v}" for k, v in counts.items()) or "nothing")
            )
            if report.backend:
                click.echo(f"caught up {plural(report.recorded, 'run')} from the result backend")
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    switch = None
    if enable_events:
        switch = EventSwitch(app, store, every=enable_events_every, stop=stop)
        switch.start()
    handler.watch = BlindWatch(switch)
    serve_metrics(metrics_port, metrics_host)
    catcher: threading.Thread | None = None
    if catch_up_every > 0:

        def catch_up_loop() -> None:
            # once at start (a listener restarted more often than the
            # period would never catch up), then every period
            failed = QuietLog(logger, logging.ERROR)
            while not stop.is_set():
                try:
                    report = catch_up(store, app, older_than=clock.now() - delay, handler=handler)
                except Exception as error:  # keep the daemon alive; the next round retries
                    failed.log("catch-up failed: %s", error, key=type(error).__name__)
                else:
                    if not report.backend:
                        logger.info("no result backend: catch-up is off")
                        return
                    if report.recorded:
                        logger.info(
                            "caught up %s from the result backend", plural(report.recorded, "run")
                        )
                if stop.wait(catch_up_every):
                    return

        catcher = threading.Thread(target=catch_up_loop, name="catch-up", daemon=True)
        catcher.start()
    listener.run()
    if switch is not None:
        switch.join(timeout=5)
    if catcher is not None:
        catcher.join(timeout=10)
