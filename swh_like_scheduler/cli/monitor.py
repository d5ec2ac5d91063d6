"""``swh scheduler start-monitor``: the monitor's duties, and their options
(shared with ``start-runner``, whose runners take turns at them)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

import click

from ..domain.validation import parse_duration
from .base import CliContext, emit_json, pass_cli
from .daemon import app_options, start_daemon

F = TypeVar("F", bound=Callable[..., Any])

_SECONDS = click.FloatRange(min=0, min_open=True)
_DAYS = click.FloatRange(min=0, min_open=True)

#: The options of the monitor's settings, shared by start-monitor and start-runner.
_MONITOR_OPTIONS = [
    click.option(
        "--ping-timeout",
        type=_SECONDS,
        default=30.0,
        show_default=True,
        help="Seconds without a sign of life from the process running a run's body "
        "(a lease's ping, the heartbeat of every guarded run; counted from the start "
        "until the first) after which its copy is put on notice. Keep it at least twice "
        "the workers' swh_scheduler_lease_ping.",
    ),
    click.option(
        "--grace",
        type=_SECONDS,
        default=30.0,
        show_default=True,
        help="Seconds the copy then has to renew its run before the run is taken "
        "(ended lost) and the task runnable again.",
    ),
    click.option(
        "--worker-timeout",
        type=_SECONDS,
        default=None,
        help="Seconds without a heartbeat after which a worker is offline and the "
        "runs no start guard took (tasks not built on SchedulerTask) are lost. Default: "
        "per worker, the longer of 3 heartbeat periods and 180 s.",
    ),
    click.option(
        "--offline-grace",
        type=click.FloatRange(min=0),
        default=60.0,
        show_default=True,
        help="Seconds a worker that said it went offline (worker-offline: a warm "
        "shutdown, a broker reconnect) has to report the runs no start guard took "
        "before they are lost.",
    ),
    click.option(
        "--oneshot-expiry-grace",
        type=click.FloatRange(min=0),
        default=300.0,
        show_default=True,
        help="Seconds after its should_start_by (T + max_delay) before a one-shot task "
        "with a max_delay that never started expires (is disabled), and only if a "
        "runner pass with room for it began after that (and after the task was "
        "created or last changed), left no ready task behind, and could not take "
        "it. A one-shot without max_delay never expires.",
    ),
    click.option(
        "--keep-runs",
        type=_DAYS,
        default=90.0,
        show_default=True,
        help="Days ended runs are kept before the retention clean-up deletes them.",
    ),
    click.option(
        "--keep-finished-oneshots",
        type=_DAYS,
        default=30.0,
        show_default=True,
        help="Days completed, disabled or cancelled one-shot tasks are kept unchanged "
        "before they are deleted with their runs.",
    ),
    click.option(
        "--retention-batch",
        type=click.IntRange(min=1),
        default=10_000,
        show_default=True,
        help="At most this many runs, and this many one-shot tasks, deleted per pass.",
    ),
    click.option(
        "--orphaned-after",
        type=_SECONDS,
        default=30.0,
        show_default=True,
        help="Seconds after which the runs of a claim whose messages were never sent "
        "(its runner died between claim and publish) are published by the monitor.",
    ),
    click.option(
        "--census-every",
        type=_SECONDS,
        default=60.0,
        show_default=True,
        help="Seconds the stored schedule-health census (the counts of OK, WARNING "
        "and ERROR tasks every API replica reports) may get old before the monitor "
        "counts again; it counts sooner when counting is cheap (five times its cost, "
        "at least a pass apart).",
    ),
    click.option(
        "--census-budget",
        type=click.FloatRange(min=0.1),
        default=None,
        help="Seconds a pass may spend assessing tasks for the census (default: 5, or a "
        "quarter of --lock-ttl when that is shorter; under half of it); a first census "
        "of millions of tasks goes on over several passes.",
    ),
    click.option(
        "--lock-ttl",
        type=click.FloatRange(min=1),
        default=60.0,
        show_default=True,
        help="Seconds the monitor's lock outlives its last renewal: after a crash, "
        "another process takes over the duties this long later.",
    ),
]


def monitor_options(func: F) -> F:
    """Add the monitor's settings to a command (see :func:`monitor_settings`)."""
    for option in reversed(_MONITOR_OPTIONS):
        func = option(func)
    return func


def monitor_settings(
    options: Mapping[str, Any],
    *,
    period: float,
    republish_after: timedelta | None,
    period_option: str = "--period",
) -> Any:
    """The :class:`MonitorSettings` of a command's monitor options."""
    from ..monitor import MonitorSettings

    if period >= options["lock_ttl"]:
        raise click.BadParameter(
            f"must be longer than {period_option} ({period:g} s): the monitor renews its lock "
            "once a pass, and another process would take it over in between",
            param_hint="--lock-ttl",
        )
    worker_timeout = options["worker_timeout"]
    return MonitorSettings(
        ping_timeout=timedelta(seconds=options["ping_timeout"]),
        grace=timedelta(seconds=options["grace"]),
        period=timedelta(seconds=period),
        worker_timeout=None if worker_timeout is None else timedelta(seconds=worker_timeout),
        offline_grace=timedelta(seconds=options["offline_grace"]),
        oneshot_expiry_grace=timedelta(seconds=options["oneshot_expiry_grace"]),
        keep_runs=timedelta(days=options["keep_runs"]),
        keep_finished_oneshots=timedelta(days=options["keep_finished_oneshots"]),
        retention_limit=options["retention_batch"],
        republish_after=republish_after,
        orphaned_after=timedelta(seconds=options["orphaned_after"]),
        lock_ttl=timedelta(seconds=options["lock_ttl"]),
        census_every=timedelta(seconds=options["census_every"]),
        census_budget=options["census_budget"],
    )


def republish_delay(value: str) -> timedelta | None:
    """``--republish-after``: a duration, ``0`` disabling re-publishing."""
    return parse_duration("republish-after", value) or None


@click.command("start-monitor")
@click.option("--once", is_flag=True, help="Do one pass, print what was done, and exit.")
@click.option(
    "--period",
    type=click.FloatRange(min=0.01),
    default=10.0,
    show_default=True,
    help="Seconds between two passes.",
)
@monitor_options
@click.option(
    "--republish-after",
    default="5 min",
    show_default=True,
    help="Send again the messages of runs dispatched this long ago that never started "
    "and are not in their queue ('0' disables).",
)
@app_options(broker_help="Celery broker to re-publish to")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the report as JSON.")
@pass_cli
def start_monitor(
    cli: CliContext,
    once: bool,
    period: float,
    republish_after: str,
    app_spec: str | None,
    broker_url: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Do the monitor's duties: steal the leases of workers that stopped
    pinging, lose the runs of workers that went silent, expire one-shot
    tasks that can no longer start in time, delete old runs and finished
    one-shot tasks, re-publish lost messages.

    Several monitors (and runners with --monitor) may run: a lock in the
    database lets exactly one of them do the duties at a time."""
    from ..dispatch.routing import LiveWorkers
    from ..monitor import monitor_loop
    from ..store.clock import DatabaseClock

    settings = monitor_settings(
        options, period=period, republish_after=republish_delay(republish_after)
    )
    app = start_daemon(cli, "start-monitor", app_spec=app_spec, broker_url=broker_url).app
    workers = LiveWorkers(app)
    store = cli.scheduling_store("start-monitor")
    keeper = None
    index = cli.index()
    if index is not None:
        from ..index.keeper import IndexKeeper

        keeper = IndexKeeper(index, store)
    clock = DatabaseClock(store, role="monitor").now
    if once:
        report = monitor_loop(
            store, settings, once=True, app=app, workers=workers, index=keeper, clock=clock
        )
        assert report is not None
        if as_json:
            emit_json(report.to_json())
        else:
            click.echo(report.summary())
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    monitor_loop(store, settings, stop=stop, app=app, workers=workers, index=keeper, clock=clock)
