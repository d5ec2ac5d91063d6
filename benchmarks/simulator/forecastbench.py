"""forecast: what ``swh scheduler forecast`` costs on a live PostgreSQL store
(issue 62: a 24-hour forecast of 100,000 tasks in at most 60 s of one core).

The store is the shipped crawler fleet's tasks created in a scratch
PostgreSQL database (its types, schedules and next starts; no run yet, so
durations come from each type's expected duration). One forecast with the
same worker slots the workload gives, each size and each simulation store
in a process of its own (spawn): the forecast's own process time (reading
the live store, then the simulation, both in that process; PostgreSQL's
server time is not counted) and the process's peak memory. Two simulation
stores: the one held in memory (the default) and a private SQLite file
(``--sim-db-url sqlite``), one after the other on the same live store.
Measured: task·days forecast per CPU-second, and CPU-seconds for the
forecast asked. Ratios: each size's rate against the smallest's in the same
run (memory store), and the memory store's rate against SQLite's.
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


#: the simulation stores compared (``db_url`` of the forecast)
STORES = ("memory", "sqlite")


def _one(url: str, slots: dict[str, int], hours: float, now: datetime, sim: str, out: Any) -> None:
    from swh_like_scheduler.simulator.forecast import forecast
    from swh_like_scheduler.store import SQLAlchemyStore

    store = SQLAlchemyStore.from_url(url)
    started = time.process_time()
    found = forecast(store, now, slots=slots, horizon=timedelta(hours=hours), db_url=sim)
    cpu = time.process_time() - started
    store.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put({"cpu": cpu, "rss_mb": rss, "tasks": found.tasks})


def measure(server: str, tasks: int, hours: float) -> dict[str, dict[str, Any]]:
    """Per simulation store, what one forecast cost."""
    now = datetime.now(tz=UTC).replace(microsecond=0)
    slots = _populate(server, tasks, now)
    spawn = multiprocessing.get_context("spawn")
    found: dict[str, dict[str, Any]] = {}
    try:
        for sim in STORES:
            out = spawn.Queue()
            url = database_url(server, DATABASE)
            child = spawn.Process(target=_one, args=(url, slots, hours, now, sim, out))
            child.start()
            try:
                found[sim] = out.get()
            finally:
                child.join()
    finally:
        drop_database(server, DATABASE)
    return found


def run(ctx: Context) -> None:
    sizes = QUICK if ctx.quick else FULL
    rates: list[float] = []
    for tasks, hours in sizes:
        found = measure(ctx.postgres, tasks, hours)
        days = hours / 24
        rate = {sim: f["tasks"] * days / f["cpu"] for sim, f in found.items()}
        rates.append(rate["memory"])
        for sim, figures in found.items():
            log(
                f"forecast {figures['tasks']:,} live tasks x {hours:g} h on the {sim} store: "
                f"{figures['cpu']:.1f} CPU-s, {figures['rss_mb']:.0f} MB"
            )
        ctx.measurement(
            "forecast",
            "task_days_per_cpu_s",
            "task-days/CPU-s",
            [rate["memory"]],
            ratios={
                "vs_smallest": ratio(rate["memory"], rates[0]),
                "memory_vs_sqlite": ratio(rate["memory"], rate["sqlite"]),
            },
            digits=1,
            tasks=tasks,
            hours=hours,
        )
        for sim, figures in found.items():
            ctx.measurement(
                "forecast",
                "cpu",
                "CPU-s",
                [figures["cpu"]],
                digits=1,
                tasks=tasks,
                hours=hours,
                store=sim,
            )
            ctx.measurement(
                "forecast",
                "peak_memory",
                "MB",
                [figures["rss_mb"]],
                digits=0,
                tasks=tasks,
                hours=hours,
                store=sim,
            )
