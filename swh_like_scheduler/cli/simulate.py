"""``swh scheduler simulate``: the scheduler's own code on a virtual clock."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from ..domain.exceptions import InvalidInput
from ..domain.model import DispatchOrder
from ..domain.validation import parse_duration
from .base import CliContext, emit_json, now, pass_cli


def _assignments(option: str, values: tuple[str, ...]) -> dict[str, str]:
    """``TYPE=VALUE`` pairs of a repeated option."""
    pairs = {}
    for value in values:
        name, sep, right = value.partition("=")
        if not sep or not name.strip() or not right.strip():
            raise InvalidInput(option, f"{value!r} is not TYPE=VALUE")
        pairs[name.strip()] = right.strip()
    return pairs


def _workers(values: tuple[str, ...]) -> dict[str, int]:
    counts = {}
    for name, text in _assignments("workers", values).items():
        if not text.isdigit() or not 1 <= int(text) <= 100_000:
            raise InvalidInput(f"workers.{name}", f"{text!r} is not a number of workers (1+)")
        counts[name] = int(text)
    return counts


@click.command("simulate")
@click.argument("workload", required=False)
@click.option("--tasks", type=click.IntRange(min=1), help="Scale the workload to N tasks.")
@click.option(
    "--days",
    type=click.FloatRange(min=0.001, max=366),
    help="Simulated days (default: the file's).",
)
@click.option(
    "--load",
    "loads",
    type=click.FloatRange(min=0.01, max=100),
    multiple=True,
    help="Give each task type the workers at which its tasks ask for F times what they "
    "can do (1.5 = 150 %): its demand over F, rounded up, then its runs lengthened to "
    "make the load exact; a type whose runs would have to be more than 8x as long keeps "
    "them, and is reported (warning, report heading, JSON load_not_reached) at the load "
    "it reaches. Each type's max_allowed_duration is lengthened with its runs (see "
    "--keep-limits). Repeat to compare loads. Not with --workers (which it sets) nor "
    "--from-store. Default: the workload as written.",
)
@click.option(
    "--keep-limits",
    is_flag=True,
    help="With --load: keep each type's max_allowed_duration (and max_expected_duration) "
    "as written. By default they are lengthened with the runs, so that the load does not "
    "also change how many runs are killed for lasting too long; kept, the share of runs "
    "over the limit before and after is warned when it grows (JSON run_limits).",
)
@click.option(
    "--keep-slots/--no-keep-slots",
    default=True,
    show_default=True,
    help="Whether the runner keeps a quarter of each queue's worker slots from long runs "
    "(those that would hold a slot past the earliest deadline of a shorter task waiting "
    "on the queue) while shorter tasks wait or run, as a runner that hears its workers "
    "does; --no-keep-slots: as one that does not (to compare).",
)
@click.option(
    "--policy",
    "orders",
    type=click.Choice([o.value for o in DispatchOrder]),
    multiple=True,
    help="Dispatch order to simulate (repeat to compare; default: all four).",
)
@click.option("--seed", type=int, help="Seed of every random draw (default: the file's).")
@click.option(
    "--workers",
    "worker_counts",
    multiple=True,
    metavar="TYPE=N",
    help="Worker slots of a task type (repeatable; not with --load, which sets them). Its "
    "max_queue_length is kept as written (--tasks, --load and --find-workers' trials scale "
    "it with the workers); a queue limit that bounds the runs whatever the workers is "
    "warned.",
)
@click.option(
    "--interval",
    "intervals",
    multiple=True,
    metavar="TYPE=DURATION",
    help="With --from-store: a new default interval for a type and its adaptive tasks.",
)
@click.option(
    "--from-store",
    is_flag=True,
    help="Simulate the next --days (default 1) of the configured database's task types "
    "and live tasks (read only: nothing is written to it).",
)
@click.option(
    "--find-workers",
    is_flag=True,
    help="Search the smallest worker count per type that keeps its promises (with the "
    "first --policy): ERROR-hours at or under --target-error-hours, the intervals it "
    "delivers stretched at most --max-stretch over what a worker per task delivers, and "
    "no more cron firings lost than with a worker per task. Each trial's queue limits "
    "are scaled with its workers; every trial is printed (stretch, busy share, cron runs "
    "lost). Refused at once (exit 2) for types above the ERROR target with a worker per "
    "task.",
)
@click.option(
    "--max-stretch",
    type=click.FloatRange(min=1.0),
    default=1.1,
    show_default=True,
    help="With --find-workers: how much longer the intervals delivered may be than with "
    "a worker per task (1.1: 66 min for an hourly task).",
)
@click.option(
    "--target-error-hours",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="The ERROR-hours --find-workers aims at, per type.",
)
@click.option(
    "--sim-db-url",
    help="Where the simulation keeps its rows: 'memory' (the default: held in memory), "
    "'sqlite' (a private SQLite file), or the URL of an EMPTY database (its tables are "
    "dropped after).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option(
    "--report",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write report.md, results.json and the plots (PNG) into this folder "
    "(needs the 'plots' extra, checked before simulating).",
)
@pass_cli
def simulate(cli: CliContext, **options: Any) -> None:
    """Run WORKLOAD (a TOML file, or a shipped one: crawler-fleet, reminders,
    mixed-platform, always-changing, long-and-short; default crawler-fleet)
    through the real runner pass,
    store, policy and listener on a virtual clock, with simulated queues and
    workers, and compare dispatch orders: ERROR- and WARNING-hours, lateness
    at dispatch and at start (time in the queue counted), outcomes,
    retries, queue depths, and per task group the interval written against
    the interval delivered (stretch). Types whose peak demand exceeds their
    workers though their mean load does not are warned (from the workload's
    definition, before simulating)."""
    # stopped by SIGTERM as by Ctrl-C: the simulation's database is removed
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        _simulate(cli, **options)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _simulate(
    cli: CliContext,
    workload: str | None,
    tasks: int | None,
    days: float | None,
    loads: tuple[float, ...],
    keep_limits: bool,
    keep_slots: bool,
    orders: tuple[str, ...],
    seed: int | None,
    worker_counts: tuple[str, ...],
    intervals: tuple[str, ...],
    from_store: bool,
    find_workers: bool,
    target_error_hours: float,
    max_stretch: float,
    sim_db_url: str | None,
    as_json: bool,
    report: Path | None,
) -> None:
    from ..simulator import compare as comparing
    from ..simulator.live import from_store as live_workload
    from ..simulator.report import dumps, page, require_plotting, write_report
    from ..simulator.workload import load_workload

    if report is not None:
        require_plotting()
    if max_stretch != 1.1 and not find_workers:
        raise InvalidInput("max_stretch", "--max-stretch goes with --find-workers")
    if keep_limits and not loads:
        raise InvalidInput("keep_limits", "--keep-limits goes with --load")
    if loads and worker_counts:
        raise InvalidInput(
            "workers",
            "--workers and --load both set the worker counts: give one of them "
            "(--load F gives each type its demand over F, rounded up)",
        )
    chosen = [DispatchOrder(o) for o in orders] or list(comparing.DEFAULT_ORDERS)
    given = None
    if from_store:
        if workload is not None:
            raise InvalidInput(
                "workload", "--from-store simulates the database's tasks: give no file"
            )
        if loads:
            raise InvalidInput(
                "load",
                "--load scales a workload file's runs; --from-store keeps the live "
                "tasks' own durations: set --workers instead",
            )
        durations = {
            name: parse_duration(f"interval.{name}", text)
            for name, text in _assignments("interval", intervals).items()
        }
        model, given = live_workload(
            cli.store,
            now(),
            days=days or 1.0,
            workers=_workers(worker_counts),
            intervals=durations,
            seed=1 if seed is None else seed,
        )
    else:
        if intervals:
            raise InvalidInput("interval", "--interval goes with --from-store")
        model = load_workload(workload)
        if tasks is not None:
            model = model.with_tasks(tasks)
        if days is not None:
            model = model.with_days(days)
        if seed is not None:
            model = model.with_seed(seed)
        model = model.with_workers(_workers(worker_counts))

    def progress(line: str) -> None:
        click.echo(line, err=True)

    if find_workers:
        load = loads[0] if loads else None
        scaled = model if load is None else model.with_load(load, scale_limits=not keep_limits)
        for line in comparing.notes(model, scaled, load, given).lines:
            progress(line)
        sizing = comparing.find_workers(
            scaled,
            chosen[0],
            target=target_error_hours,
            max_stretch=max_stretch,
            db_url=sim_db_url,
            progress=progress,
            tasks=given,
        )
        if as_json:
            emit_json(sizing.to_json())
            return
        click.echo(
            f"Trials ({chosen[0].value} order; the first with a worker per task, queue "
            "limits scaled with the workers; stretch: the intervals delivered over those "
            "written; busy: the share of the workers' time spent running):"
        )
        click.echo("")
        for line in sizing.table():
            click.echo(line)
        click.echo("")
        answer = sizing.answer
        for name, count in sorted(sizing.workers.items()):
            stretch = answer.stretch[name]
            added = answer.added_stretch.get(name)
            busy = answer.busy_share[name]
            click.echo(
                f"{name}: {count} workers ({sizing.error_hours[name]:g} ERROR-hours, "
                f"target {target_error_hours:g}; intervals "
                + ("-" if stretch is None else f"x{stretch:.2f} as written")
                + ("" if added is None else f", x{added:.2f} of a worker per task's")
                + f", bound x{max_stretch:g}; busy "
                + ("-" if busy is None else f"{busy:.0%}")
                + f"; cron runs lost {answer.runs_lost[name]} of {answer.runs_owed[name]})"
            )
        return
    results = comparing.compare(
        model,
        chosen,
        list(loads) or [None],
        db_url=sim_db_url,
        progress=progress,
        tasks=given,
        scale_limits=not keep_limits,
        keep_slots=keep_slots,
    )
    if report is not None:
        for path in write_report(results, report):
            progress(f"wrote {path}")
    if as_json:
        sys.stdout.write(dumps(results) + "\n")
    else:
        click.echo(page(results, []))
