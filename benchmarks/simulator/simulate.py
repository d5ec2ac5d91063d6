"""simulate: ``swh scheduler simulate``'s engine on the shipped crawler
fleet, the runner's default order (deadline), as written (about 90 % load): wall seconds and
simulated events per second (dispatches, run ends, listener batches,
runner passes and condition samples the simulation handled) for 10,000
tasks over 7 simulated days (the target: under 5 minutes), with 1,000 tasks
over the same days as the baseline in the same run (a ratio of events per
second near 1 means the cost grows linearly with the tasks). ``--quick``:
2,000 and 500 tasks over 1 day."""

from __future__ import annotations

import statistics
import time

from swh_like_scheduler.domain.model import RUNNER_ORDER
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.workload import load_workload

from ..common import Context, log, ratio

#: (tasks, days) measured, then the baseline's tasks
FULL = ((10_000, 7.0), 1_000)
QUICK = ((2_000, 1.0), 500)
#: the speed target of issue 17, seconds
TARGET = 300.0


def measure(tasks: int, days: float) -> tuple[float, int, dict[str, int]]:
    workload = load_workload("crawler-fleet").with_tasks(tasks).with_days(days)
    started = time.perf_counter()
    result = Simulation(workload, RUNNER_ORDER).run()
    seconds = time.perf_counter() - started
    events = result["events"]
    return seconds, sum(events.values()), events


def run(ctx: Context) -> None:
    (tasks, days), base_tasks = QUICK if ctx.quick else FULL
    rates: dict[int, list[float]] = {tasks: [], base_tasks: []}
    walls: dict[int, list[float]] = {tasks: [], base_tasks: []}
    for attempt in range(ctx.repeat):
        for size in (base_tasks, tasks):
            seconds, count, events = measure(size, days)
            walls[size].append(seconds)
            rates[size].append(count / seconds)
            log(f"simulate {size:,} tasks x {days:g} days #{attempt}: {seconds:.1f}s, {events}")
    base_rate = statistics.median(rates[base_tasks])
    ctx.measurement(
        "simulate",
        "events_per_s",
        "events/s",
        rates[tasks],
        ratios={
            "vs_baseline_tasks": ratio(sorted(rates[tasks])[len(rates[tasks]) // 2], base_rate)
        },
        digits=1,
        tasks=tasks,
        days=days,
        baseline_tasks=base_tasks,
    )
    wall = statistics.median(walls[tasks])
    ctx.measurement(
        "simulate",
        "wall",
        "s",
        walls[tasks],
        ratios={"vs_target_300s": ratio(wall, TARGET)},
        digits=1,
        tasks=tasks,
        days=days,
    )
