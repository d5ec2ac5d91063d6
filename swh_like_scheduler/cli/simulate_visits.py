"""``swh scheduler simulate-visits``: the origin-visit scheduler's policies
compared on one listed-origin world, on a virtual clock."""

from __future__ import annotations

import click

from .base import CliContext, emit_json, pass_cli

_COLUMNS = (
    ("policy", "policy", "{}"),
    ("visits", "visits", "{:,}"),
    ("eventful", "eventful_share", "{:.1%}"),
    ("stale origin-h", "stale_origin_hours", "{:,.0f}"),
    ("stale", "stale_share", "{:.1%}"),
    ("ERROR origin-h", "error_origin_hours", "{:,.0f}"),
    ("never visited", "never_visited", "{:,}"),
)


@click.command("simulate-visits")
@click.option(
    "--policy",
    "policies",
    multiple=True,
    help="A policy alone, or 'mix' (the default mix); repeatable (default: each, and mix).",
)
@click.option("--origins", type=click.IntRange(1, 1_000_000), default=1000, show_default=True)
@click.option("--added-per-hour", type=click.IntRange(0, 100_000), default=5, show_default=True)
@click.option("--days", type=click.FloatRange(0.01, 365), default=3.0, show_default=True)
@click.option("--workers", type=click.IntRange(1, 10_000), default=2, show_default=True)
@click.option("--visit-minutes", type=click.FloatRange(0.01, 1440), default=5.0, show_default=True)
@click.option("--queue-limit", type=click.IntRange(1, 1_000_000), default=50, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def simulate_visits(
    cli: CliContext,
    policies: tuple[str, ...],
    origins: int,
    added_per_hour: int,
    days: float,
    workers: int,
    visit_minutes: float,
    queue_limit: int,
    seed: int,
    as_json: bool,
) -> None:
    """Run each policy on the same world of listed origins (changing at
    log-uniform rates, a lister adding origins every hour) and compare
    visits, eventful share, stale and ERROR origin-hours."""
    from ..simulator.visits import DEFAULT_CHOICES, VisitWorld, compare

    world = VisitWorld(
        origins=origins,
        added_per_hour=added_per_hour,
        days=days,
        workers=workers,
        visit_minutes=visit_minutes,
        queue_limit=queue_limit,
        seed=seed,
    )
    results = compare(world, policies or DEFAULT_CHOICES)
    if as_json:
        emit_json(results)
        return
    rows = [[text.format(r[key]) for _, key, text in _COLUMNS] for r in results]
    widths = [max(len(h), *(len(row[n]) for row in rows)) for n, (h, _, _) in enumerate(_COLUMNS)]
    click.echo("  ".join(h.ljust(w) for (h, _, _), w in zip(_COLUMNS, widths, strict=True)))
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
