"""simscale: how the simulator's cost grows with the fleet (issue 46): the
shipped crawler fleet, as written, one simulated day, the runner's default
order, at several sizes, each in a process of its own. Per size: task·days
simulated per CPU-second (the simulation's own process time: the store's
SQLite file is in the same process) and the process's peak memory. Ratio:
each size's rate against the smallest's in the same run (above 1: a
dispatch costs less in a larger fleet, the passes' fixed cost spread over
more of them). ``--quick``: 2,000 and 20,000 tasks; the full run adds
100,000."""

from __future__ import annotations

import multiprocessing
import resource
import time
from typing import Any

from .common import Context, log, ratio

QUICK = (2_000, 20_000)
FULL = (2_000, 20_000, 100_000)
DAYS = 1.0


def _one(tasks: int, days: float, out: Any) -> None:
    from swh_like_scheduler.model import RUNNER_ORDER
    from swh_like_scheduler.simulator.engine import Simulation
    from swh_like_scheduler.simulator.workload import load_workload

    workload = load_workload("crawler-fleet").with_tasks(tasks).with_days(days)
    started = time.process_time()
    result = Simulation(workload, RUNNER_ORDER).run()
    cpu = time.process_time() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put({"cpu": cpu, "rss_mb": rss, "dispatches": result["events"].get("dispatch", 0)})


def measure(tasks: int, days: float) -> dict[str, Any]:
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    child = spawn.Process(target=_one, args=(tasks, days, out))
    child.start()
    found: dict[str, Any] = out.get()
    child.join()
    return found


def run(ctx: Context) -> None:
    sizes = QUICK if ctx.quick else FULL
    rates: dict[int, float] = {}
    for tasks in sizes:
        found = measure(tasks, DAYS)
        rate = tasks * DAYS / found["cpu"]
        rates[tasks] = rate
        log(
            f"simscale {tasks:,} tasks x {DAYS:g} day: {found['cpu']:.1f} CPU-s, "
            f"{found['dispatches']:,} dispatches, {found['rss_mb']:.0f} MB"
        )
        ctx.measurement(
            "simscale",
            "task_days_per_cpu_s",
            "task-days/CPU-s",
            [rate],
            ratios={"vs_smallest": ratio(rate, rates[sizes[0]])},
            digits=1,
            tasks=tasks,
            days=DAYS,
        )
        ctx.measurement(
            "simscale",
            "peak_memory",
            "MB",
            [found["rss_mb"]],
            digits=0,
            tasks=tasks,
            days=DAYS,
        )
        ctx.measurement(
            "simscale",
            "cpu_per_dispatch",
            "ms",
            [1000 * found["cpu"] / max(1, found["dispatches"])],
            digits=2,
            tasks=tasks,
            days=DAYS,
        )
