"""forecast: what ``swh scheduler forecast`` costs on a live PostgreSQL store
(issue 62: a 24-hour forecast of 100,000 tasks in at most 60 s of one core).

The store is the shipped crawler fleet's tasks created in a scratch
PostgreSQL database (its types, schedules and next starts; no run yet, so
durations come from each type's expected duration). One forecast with the
same worker slots the workload gives, each size in a process of its own
(spawn): the forecast's own process time (reading the live store, then the
simulation on a private SQLite file, both in that process; PostgreSQL's
server time is not counted) and the process's peak memory. Measured:
task·days forecast per CPU-second, and CPU-seconds for the forecast asked.
Ratio: each size's rate against the smallest's in the same run.
``--quick``: 2,000 and 20,000 tasks over 6 hours; the full run 10,000 and
100,000 tasks over 24 hours (the issue's case; about 10 minutes)."""

from __future__ import annotations

import multiprocessing
import resource
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ..common import Context, database_url, drop_database, fresh_store, log, ratio

QUICK = ((2_000, 6.0), (20_000, 6.0))
FULL = ((10_000, 24.0), (100_000, 24.0))
DATABASE = "swh_bench_forecast"


def _populate(server: str, tasks: int, now: datetime) -> dict[str, int]:
    """The crawler fleet's ``tasks`` in a fresh database; the slots per queue."""
    from swh_like_scheduler.domain.model import RUNNER_ORDER
    from swh_like_scheduler.simulator.engine import Simulation
    from swh_like_scheduler.simulator.workload import load_workload

    workload = replace(load_workload("crawler-fleet").with_tasks(tasks), start=now)
    store = fresh_store(server, DATABASE)
    try:
        Simulation(workload, RUNNER_ORDER)._populate(store)
        slots: dict[str, int] = {}
        for task_type in store.get_task_types():
            queue = task_type.effective_queue
            slots[queue] = slots.get(queue, 0) + workload.workers.get(task_type.type, 1)
        return slots
    finally:
        store.close()


def _one(url: str, slots: dict[str, int], hours: float, now: datetime, out: Any) -> None:
    from swh_like_scheduler.simulator.forecast import forecast
    from swh_like_scheduler.store import SQLAlchemyStore

    store = SQLAlchemyStore.from_url(url)
    started = time.process_time()
    found = forecast(store, now, slots=slots, horizon=timedelta(hours=hours))
    cpu = time.process_time() - started
    store.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put({"cpu": cpu, "rss_mb": rss, "tasks": found.tasks})


def measure(server: str, tasks: int, hours: float) -> dict[str, Any]:
    now = datetime.now(tz=UTC).replace(microsecond=0)
    slots = _populate(server, tasks, now)
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    child = spawn.Process(
        target=_one, args=(database_url(server, DATABASE), slots, hours, now, out)
    )
    child.start()
    try:
        found: dict[str, Any] = out.get()
    finally:
        child.join()
        drop_database(server, DATABASE)
    return found


def run(ctx: Context) -> None:
    sizes = QUICK if ctx.quick else FULL
    rates: list[float] = []
    for tasks, hours in sizes:
        found = measure(ctx.postgres, tasks, hours)
        days = hours / 24
        rate = found["tasks"] * days / found["cpu"]
        rates.append(rate)
        log(
            f"forecast {found['tasks']:,} live tasks x {hours:g} h: {found['cpu']:.1f} CPU-s, "
            f"{found['rss_mb']:.0f} MB"
        )
        ctx.measurement(
            "forecast",
            "task_days_per_cpu_s",
            "task-days/CPU-s",
            [rate],
            ratios={"vs_smallest": ratio(rate, rates[0])},
            digits=1,
            tasks=tasks,
            hours=hours,
        )
        ctx.measurement(
            "forecast", "cpu", "CPU-s", [found["cpu"]], digits=1, tasks=tasks, hours=hours
        )
        ctx.measurement(
            "forecast", "peak_memory", "MB", [found["rss_mb"]], digits=0, tasks=tasks, hours=hours
        )
