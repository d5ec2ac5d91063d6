"""``swh scheduler forecast``: the live platform's next hours, at today's
capacity and with more workers (:mod:`..simulator.forecast`)."""

from __future__ import annotations

import logging
import signal
import sys
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from ..domain.exceptions import InvalidInput, SchedulerError
from ..domain.model import DispatchOrder
from ..domain.validation import parse_duration
from .base import CliContext, emit_json, now, pass_cli

if TYPE_CHECKING:
    from celery import Celery

    from ..simulator.forecast import Forecast

logger = logging.getLogger(__name__)


def _counts(option: str, values: tuple[str, ...], *, plus: bool) -> dict[str, int]:
    """``QUEUE=N`` (``QUEUE=+N`` with ``plus``) pairs of a repeated option."""
    counts: dict[str, int] = {}
    for value in values:
        queue, sep, text = value.partition("=")
        queue, text = queue.strip(), text.strip()
        digits = text[1:] if plus and text.startswith("+") else text
        if not sep or not queue or not digits.isdigit() or (plus and not text.startswith("+")):
            form = "QUEUE=+N" if plus else "QUEUE=N"
            raise InvalidInput(option, f"{value!r} is not {form}")
        if not 0 <= int(digits) <= 100_000:
            raise InvalidInput(f"{option}.{queue}", f"{digits} workers is out of range")
        counts[queue] = counts.get(queue, 0) + int(digits)
    return counts


@click.command("forecast")
@click.option(
    "--hours",
    default="24 h",
    show_default=True,
    help="How far ahead (a duration: '24 h', '3 d', '90 min'; 2 min to 14 days).",
)
@click.option(
    "--workers",
    "worker_counts",
    multiple=True,
    metavar="QUEUE=N",
    help="The worker slots of a queue (repeatable). Queues not given are asked of "
    "the live workers (--ask-workers) or assumed to have one slot, as the output says.",
)
@click.option(
    "--more",
    "more",
    multiple=True,
    metavar="QUEUE=+N",
    help="A variant with N more slots on QUEUE (repeat the option with several "
    "queues in one variant separated by commas: 'loaders=+4,listers=+1'; each "
    "option is one variant).",
)
@click.option(
    "--ask-workers",
    is_flag=True,
    help="Ask the live Celery workers their pool sizes (inspect stats) for the "
    "queues --workers does not give.",
)
@click.option("--app", "app_spec", help="The Celery app (module:attribute) for --ask-workers.")
@click.option("--broker-url", help="The broker for --ask-workers (default: the configured one).")
@click.option(
    "--policy",
    type=click.Choice([o.value for o in DispatchOrder]),
    default=DispatchOrder.DEADLINE.value,
    show_default=True,
    help="The dispatch order the runners use.",
)
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of every random draw.")
@click.option(
    "--size",
    is_flag=True,
    help="Also search, per queue, the fewest worker slots that end the horizon with no "
    "task in ERROR, never more in ERROR than now, and intervals stretched at most "
    "--max-stretch times those delivered with the most slots tried (4x those given, at "
    "least 8): a simulation per step of a bisection.",
)
@click.option(
    "--max-stretch",
    type=click.FloatRange(min=1.0),
    default=1.1,
    show_default=True,
    help="With --size: the stretch bound.",
)
@click.option(
    "--record",
    is_flag=True,
    help="Store the forecast in the database (the latest few are kept): GET /forecast "
    "and /metrics report it on every API replica.",
)
@click.option(
    "--every",
    help="With --record: forecast again this long after each forecast began (a "
    "duration: '15 min'), until stopped.",
)
@click.option(
    "--sim-db-url",
    help="Where the simulation keeps its rows: 'memory' (the default: held in memory), "
    "'sqlite' (a private SQLite file), or the URL of an EMPTY database (its tables are "
    "dropped after).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the forecast as JSON.")
@pass_cli
def forecast(cli: CliContext, **options: Any) -> None:
    """Forecast the next hours of the live platform: read the task types,
    the live tasks (schedules, next starts, measured run times) and each
    type's failure shares over the last hour from the database (read only),
    run the real scheduling code forward on a virtual clock, and say per
    type and overall how many tasks will be OK, WARNING and in ERROR at the
    horizon and at the worst moment, from when ERROR grows, and how far the
    delivered intervals stretch; with --more, the same with more workers.
    Seeded: the same database and options give the same forecast."""
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        _forecast(cli, **options)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _forecast(
    cli: CliContext,
    hours: str,
    worker_counts: tuple[str, ...],
    more: tuple[str, ...],
    ask_workers: bool,
    app_spec: str | None,
    broker_url: str | None,
    policy: str,
    seed: int,
    size: bool,
    max_stretch: float,
    record: bool,
    every: str | None,
    sim_db_url: str | None,
    as_json: bool,
) -> None:
    from ..simulator.forecast import forecast as run_forecast
    from ..simulator.forecast import queues_of

    horizon = parse_duration("hours", hours)
    if (app_spec or broker_url) and not ask_workers:
        raise InvalidInput("ask_workers", "--app and --broker-url go with --ask-workers")
    if max_stretch != 1.1 and not size:
        raise InvalidInput("max_stretch", "--max-stretch goes with --size")
    period = None
    if every is not None:
        if not record:
            raise InvalidInput("every", "--every goes with --record")
        period = parse_duration("every", every)
        if period < timedelta(minutes=1):
            raise InvalidInput("every", f"{every!r} is under a minute")
    slots = _counts("workers", worker_counts, plus=False)
    variants = [_counts("more", tuple(v.split(",")), plus=True) for v in more]
    # the app first: it may name the database the store opens
    app = _app(cli, app_spec, broker_url) if ask_workers else None
    store = cli.store
    queues = queues_of(store.get_task_types())
    if not queues:
        raise InvalidInput("task types", "the database has no task type to forecast")

    def progress(line: str) -> None:
        click.echo(line, err=True)

    def step() -> Forecast:
        """One forecast, recorded when asked (the workers asked again)."""
        asked: dict[str, int] = {}
        if app is not None:
            asked = _live_slots(app, [q for q in queues if q not in slots])
        assumed = [q for q in queues if q not in slots and q not in asked]
        began = time.monotonic()
        at = now()
        result = run_forecast(
            store,
            at,
            slots={**{q: 1 for q in assumed}, **asked, **slots},
            horizon=horizon,
            more=variants,
            seed=seed,
            order=DispatchOrder(policy),
            db_url=sim_db_url,
            assumed_slots=assumed,
            progress=progress,
            size=size,
            max_stretch=max_stretch,
        )
        if record:
            took = time.monotonic() - began
            stored = store.record_forecast(result.to_json(), at=at, took=took)
            progress(f"forecast {stored.id} recorded ({took:.1f} s)")
        return result

    if period is None:
        result = step()
    else:
        while True:  # until stopped (SIGTERM, Ctrl-C)
            began = time.monotonic()
            try:
                step()
            except SchedulerError as error:  # the database away: again next period
                logger.warning("no forecast recorded this time: %s", error)
            time.sleep(max(0.0, period.total_seconds() - (time.monotonic() - began)))
    if as_json:
        emit_json(result.to_json())
        return
    from ..simulator.forecast_text import lines

    for line in lines(result):
        click.echo(line)


def _app(cli: CliContext, app_spec: str | None, broker_url: str | None) -> Celery:
    from .daemon import connect

    return connect(cli, app_spec=app_spec, broker_url=broker_url).app


def _live_slots(app: Celery, queues: list[str]) -> dict[str, int]:
    """The slots of ``queues`` as their live workers report them (those
    with no worker answering are left out)."""
    from ..dispatch.routing import LiveWorkers

    workers = LiveWorkers(app, timeout=2.0)
    workers.refresh(force=True)
    found = {}
    for queue in queues:
        slots = workers.slots(queue)
        if slots is not None:
            found[queue] = slots
    return found
