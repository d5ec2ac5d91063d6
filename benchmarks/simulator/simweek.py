"""simweek: a week of the crawler fleet at a million tasks, measured (issue
62's goal: at most 30 minutes of one core, about 3,900 task·days per
CPU-second), not projected from one day as ``simscale`` does. The shipped
fleet as written, the runner's default order, in a process of its own (the
simulation's own process time: its store is held in memory, in the same
process). Ratio: the week's rate (task·days per CPU-second) against one
day of 100,000 tasks measured in the same run (below 1: a task·day costs
more in the larger, longer run). ``--quick``: 100,000 tasks for the week
(about 5 minutes on this machine); the full run a million (about an hour)."""

from __future__ import annotations

from ..common import Context, log, ratio
from .simscale import measure

BASELINE = 100_000
QUICK = 100_000
FULL = 1_000_000
DAYS = 7.0


def run(ctx: Context) -> None:
    tasks = QUICK if ctx.quick else FULL
    day = measure(BASELINE, 1.0)
    baseline = BASELINE / day["cpu"]
    week = measure(tasks, DAYS)
    rate = tasks * DAYS / week["cpu"]
    log(
        f"simweek {tasks:,} tasks x {DAYS:g} days: {week['cpu'] / 60:.1f} CPU-min "
        f"({week['populate']:.0f} CPU-s creating the tasks), {week['dispatches']:,} "
        f"dispatches, {week['rss_mb']:.0f} MB; {BASELINE:,} tasks x 1 day: "
        f"{day['cpu']:.1f} CPU-s"
    )
    ctx.measurement(
        "simweek",
        "task_days_per_cpu_s",
        "task-days/CPU-s",
        [rate],
        ratios={"vs_100k_day": ratio(rate, baseline)},
        digits=1,
        tasks=tasks,
        days=DAYS,
    )
    ctx.measurement("simweek", "cpu", "CPU-min", [week["cpu"] / 60], digits=1, tasks=tasks)
    ctx.measurement("simweek", "peak_memory", "MB", [week["rss_mb"]], digits=0, tasks=tasks)
