"""simweek: a week of the crawler fleet at a million tasks, measured (issue
62's goal: at most 30 minutes of one core, about 3,900 task·days per
CPU-second), not projected from one day as ``simscale`` does. The shipped
fleet as written, the runner's default order, in a process of its own (the
simulation's own process time: its store is held in memory, in the same
process). Ratio: the measured week against ``simscale``'s projection made
in the same run from one day of the same fleet (above 1: the week cost
more than seven first days). ``--quick``: 100,000 tasks (about 5 minutes
on this machine); the full run a million (about 40 minutes)."""

from __future__ import annotations

from ..common import Context, log, ratio
from .simscale import measure

QUICK = 100_000
FULL = 1_000_000
DAYS = 7.0


def run(ctx: Context) -> None:
    tasks = QUICK if ctx.quick else FULL
    day = measure(tasks, 1.0)
    projected = day["populate"] + DAYS * (day["cpu"] - day["populate"])
    week = measure(tasks, DAYS)
    rate = tasks * DAYS / week["cpu"]
    log(
        f"simweek {tasks:,} tasks x {DAYS:g} days: {week['cpu'] / 60:.1f} CPU-min "
        f"({week['populate']:.0f} CPU-s creating the tasks), {week['dispatches']:,} "
        f"dispatches, {week['rss_mb']:.0f} MB; one day projected to {projected / 60:.1f}"
    )
    ctx.measurement(
        "simweek",
        "task_days_per_cpu_s",
        "task-days/CPU-s",
        [rate],
        ratios={"vs_projected": ratio(week["cpu"], projected)},
        digits=1,
        tasks=tasks,
        days=DAYS,
    )
    ctx.measurement("simweek", "cpu", "CPU-min", [week["cpu"] / 60], digits=1, tasks=tasks)
    ctx.measurement("simweek", "peak_memory", "MB", [week["rss_mb"]], digits=0, tasks=tasks)
