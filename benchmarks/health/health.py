"""health: schedule health at scale, counted where the data is.

``SWH_BENCH_HEALTH_TASKS`` tasks (default 1M; 100k with ``--quick``; the
issue's 10M with ``SWH_BENCH_HEALTH_TASKS=10000000``) on PostgreSQL, a
tenth of them two days past their promise (ERROR), a tenth of those with
an open run. Measured, each against the full read it replaces (every
task assessed in Python, ``conditions.census``; skipped above 1M, where it
takes many minutes):

* the first build of the condition ledger (once, after the migration);
* a census step with nothing changed, and with 1 % of the tasks changed
  (the steady state: what the monitor pays at each step);
* ``/health``, ``/metrics``, the console's overview and problem list from
  4 clients of a real ``rpc-serve`` while another process refreshes the
  census back to back (the API only reads the stored census): p50 / p99
  against the issue's 100 ms."""

from __future__ import annotations

import logging
import multiprocessing
import os
import random
import time
from datetime import datetime, timedelta
from typing import Any

import httpx

from swh_like_scheduler.health import conditions
from swh_like_scheduler.health.census import refresh
from swh_like_scheduler.store import SQLAlchemyStore

from ..api.api import _load, _percentile, server
from ..common import Context, bench_type, fill_tasks, log, ratio, raw, scratch_store, utcnow

logger = logging.getLogger(__name__)

DATABASE = "swh_bench_health"
CLIENTS = 4
TARGET_MS = 100.0
#: above this many tasks the full read (the baseline) is not run
FULL_READ_MAX = 1_000_000


def _size(ctx: Context) -> int:
    given = os.environ.get("SWH_BENCH_HEALTH_TASKS")
    if given:
        return int(given)
    return 100_000 if ctx.quick else 1_000_000


def run(ctx: Context) -> None:
    count = _size(ctx)
    seconds = 3.0 if ctx.quick else 10.0
    with scratch_store(ctx.postgres, DATABASE) as store:
        bench_type(store, "bench-health", None)
        now = utcnow()
        log(f"health: filling {count:,} tasks")
        fill_tasks(store, count, now=now, due=count // 5, progress=count > 1_000_000)
        raw(
            store,
            "UPDATE task SET next_run = next_run - interval '3 days', "
            "deadline = deadline - interval '3 days' WHERE id % 10 = 0",
        )
        claimed = 0
        while claimed < count // 100:
            claimed += len(store.claim_ready_tasks("bench", now=now, limit=5000))
        raw(store, "VACUUM ANALYZE task")
        millions = count / 1_000_000
        full = None
        if count <= FULL_READ_MAX:
            started = time.perf_counter()
            conditions.census(store, now)
            full = time.perf_counter() - started
            ctx.measurement("health", "full_read", "s", [full], tasks=count, digits=2)
        started = time.perf_counter()
        built = refresh(store, now, holder="bench", budget=1e9)
        build = time.perf_counter() - started
        assert built.census is not None
        raw(store, "VACUUM ANALYZE task_condition")
        ctx.measurement(
            "health",
            "first_build",
            "s",
            [build],
            tasks=count,
            per_million_s=round(build / millions, 1),
            not_ok=built.census.not_ok,
            ratios={"vs_full_read": None if full is None else ratio(build, full)},
            digits=2,
        )
        steps = {"nothing_changed": 0, "one_percent_changed": count // 100}
        # later than the fill by more than the census's overlap: the steady
        # state, where only what changed since the last census is read again
        at = now + timedelta(minutes=10)
        for name, changed in steps.items():
            if changed:
                raw(
                    store,
                    "UPDATE task SET updated_at = %s WHERE id %% 100 = 7",
                    (at + timedelta(seconds=1),),
                )
            samples = []
            for _ in range(ctx.repeat):
                at += timedelta(seconds=1)
                began = time.perf_counter()
                step = refresh(store, at, holder="bench", budget=1e9)
                samples.append(time.perf_counter() - began)
                assert step.census is not None
                if changed:  # once: the later ones find nothing new
                    break
            ctx.measurement(
                "health",
                f"step_{name}",
                "s",
                samples,
                tasks=count,
                changed=changed,
                per_million_s=round(min(samples) / millions, 2),
                ratios={"vs_full_read": None if full is None else ratio(min(samples), full)},
                digits=2,
            )
        _serve(ctx, store, count, seconds, at)


def _counting(url: str, at: datetime, stop: Any, steps: Any) -> None:
    """The monitor's duty, back to back, in a process of its own (as the
    monitor is): steps at a clock a second later each, and never behind the
    real one (the server's: behind it, the stored census looks old to the
    server, which then counts too; at 10M the fill and the first build
    take half an hour)."""
    store = SQLAlchemyStore.from_url(url)
    clock = at
    while not stop.is_set():
        clock = max(clock + timedelta(seconds=1), utcnow())
        step = refresh(store, clock, holder="bench-monitor", budget=30)
        if step.census is None:  # a census not stored is no step of the duty
            logger.warning("census step at %s: %s", clock.isoformat(), step.skipped)
            continue
        with steps.get_lock():
            steps.value += 1
    store.close()


def _serve(ctx: Context, store: SQLAlchemyStore, count: int, seconds: float, at: datetime) -> None:
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    steps = spawn.Value("i", 0)
    url = store.engine.url.render_as_string(hide_password=False)
    # the census brought to the real clock first (not measured), as a
    # monitor running all along would have kept it
    at = max(at, utcnow())
    refresh(store, at, holder="bench", budget=1e9)
    with server(store) as api:
        browser = httpx.Client(base_url=api.base_url, timeout=120)
        token = str(api.headers["authorization"]).split(" ", 1)[1]
        browser.post("/console/login", data={"token": token})
        api.get("/metrics").raise_for_status()
        counter = spawn.Process(target=_counting, args=(url, at, stop, steps), daemon=True)
        counter.start()
        try:
            for name, path, client in (
                ("health", "/health", api),
                ("metrics", "/metrics", api),
                ("overview", "/console/", browser),
                ("problems", "/console/problems", browser),
                ("problems_last_page", "/console/problems?page=1000000", browser),
            ):
                pool = [
                    httpx.Client(
                        base_url=api.base_url,
                        headers=client.headers,
                        cookies=client.cookies,
                        timeout=120,
                    )
                    for _ in range(CLIENTS)
                ]

                def get(rng: random.Random, path: str = path, pool: list = pool) -> None:
                    pool[rng.randrange(CLIENTS)].get(path)

                latencies, rate = _load(seconds, get, clients=CLIENTS)
                for http in pool:
                    http.close()
                p99 = _percentile(latencies, 0.99)
                ctx.emit(
                    {
                        "scenario": "health",
                        "measurement": f"{name}_while_counting",
                        "tasks": count,
                        "clients": CLIENTS,
                        "unit": "ms",
                        "p50": _percentile(latencies, 0.5),
                        "p99": p99,
                        "requests_per_s": round(rate, 1),
                        "census_steps": steps.value,
                        "ratios": {"p99_vs_100ms_target": ratio(p99, TARGET_MS)},
                    }
                )
        finally:
            stop.set()
            counter.join(timeout=600)
            if counter.is_alive():
                counter.kill()
            browser.close()
