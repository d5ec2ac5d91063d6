"""simscale: how the simulator's cost grows with the fleet (issue 46): the
shipped crawler fleet, as written, one simulated day, the runner's default
order, at several sizes, each in a process of its own. Per size: task·days
simulated per CPU-second (the simulation's own process time: the store's
SQLite file is in the same process), the CPU spent creating the tasks
(``populate``) apart from the day's run, CPU per dispatch over the run, the
process's peak memory, and, for the largest size, the CPU a week would take
(the populate once, the day's run seven times: a projection, said so). Ratio:
each size's rate against the smallest's in the same run (above 1: a dispatch
costs less in a larger fleet, the passes' fixed cost spread over more of
them). ``--quick``: 2,000 and 20,000 tasks; the full run 10,000, 100,000
and 1,000,000 (about 40 minutes on 2 cores)."""

from __future__ import annotations

import multiprocessing
import resource
import time
from typing import Any

from ..common import Context, log, ratio

QUICK = (2_000, 20_000)
FULL = (10_000, 100_000, 1_000_000)
DAYS = 1.0


def _one(tasks: int, days: float, out: Any) -> None:
    from swh_like_scheduler.domain.model import RUNNER_ORDER
    from swh_like_scheduler.simulator.engine import Simulation
    from swh_like_scheduler.simulator.workload import load_workload

    workload = load_workload("crawler-fleet").with_tasks(tasks).with_days(days)
    simulation = Simulation(workload, RUNNER_ORDER)
    populate = simulation._populate
    spent: list[float] = []

    def timed(store: Any) -> Any:
        begun = time.process_time()
        created = populate(store)
        spent.append(time.process_time() - begun)
        return created

    simulation._populate = timed  # type: ignore[method-assign]
    started = time.process_time()
    result = simulation.run()
    cpu = time.process_time() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    dispatches = result["events"].get("dispatch", 0)
    out.put({"cpu": cpu, "populate": spent[0], "rss_mb": rss, "dispatches": dispatches})


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
        running = found["cpu"] - found["populate"]
        log(
            f"simscale {tasks:,} tasks x {DAYS:g} day: {found['cpu']:.1f} CPU-s "
            f"({found['populate']:.1f} creating the tasks), {found['dispatches']:,} "
            f"dispatches, {found['rss_mb']:.0f} MB"
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
            [1000 * running / max(1, found["dispatches"])],
            digits=2,
            tasks=tasks,
            days=DAYS,
        )
        ctx.measurement("simscale", "populate", "CPU-s", [found["populate"]], digits=1, tasks=tasks)
        if tasks == sizes[-1]:
            week = found["populate"] + 7 * running / DAYS
            log(f"simscale {tasks:,} tasks x 7 days (projected): {week / 60:.0f} CPU-min")
            ctx.measurement(
                "simscale",
                "projected_week",
                "CPU-min",
                [week / 60],
                digits=0,
                tasks=tasks,
                days=7,
            )
