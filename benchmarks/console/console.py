"""console: the console's pages at scale, against its 300 ms target.

1M tasks (100k with ``--quick``), a tenth of them far past their deadline
(ERROR: never run) and ``count / 10`` open runs, on PostgreSQL, served by a
real ``swh scheduler rpc-serve``; a session opened as a browser does. Each
page: p50 / p99 of 20 requests from one client once the background counts
are in, then p50 / p99 with 4 clients at once. Also: how long the census
(the background count of every live task's condition, behind the counts
and the problem list) takes at that size, in this process."""

from __future__ import annotations

import random
import re
import statistics
import time
from datetime import timedelta
from typing import Any

import httpx

from swh_like_scheduler.domain.model import TaskStatus
from swh_like_scheduler.health import conditions
from swh_like_scheduler.store import TaskFilter

from ..api.api import _load, _percentile, server
from ..common import Context, bench_type, fill_tasks, log, ratio, raw, scratch_store, utcnow

DATABASE = "swh_bench_console"
#: the issue's target for every page
TARGET_MS = 300.0
CLIENTS = 4


def _pages(task_id: int, last_page: int) -> dict[str, str]:
    return {
        "overview": "/console/",
        "live": "/console/live",
        "problems": "/console/problems",
        "problems_last_page": f"/console/problems?page={last_page}",
        # a new text each time: a selection is filtered once, then kept
        "problems_text_filter": "/console/problems?type=bench&level=ERROR&q=forge.example%2F9{n}",
        "task": f"/console/tasks/{task_id}",
    }


def run(ctx: Context) -> None:
    count = 100_000 if ctx.quick else 1_000_000
    seconds = 3.0 if ctx.quick else 10.0
    with scratch_store(ctx.postgres, DATABASE) as store:
        bench_type(store, "bench-console", None)
        now = utcnow()
        log(f"console: filling {count:,} tasks")
        fill_tasks(store, count, now=now, due=count // 5)
        # a tenth never ran and are two days past their promise: ERROR
        raw(
            store,
            "UPDATE task SET next_run = next_run - interval '3 days', "
            "deadline = deadline - interval '3 days' WHERE id % 10 = 0",
        )
        claimed = 0
        while claimed < count // 10:
            claimed += len(store.claim_ready_tasks("bench", now=now, limit=5000))
        raw(store, "ANALYZE task")
        raw(store, "ANALYZE task_run")
        log(f"console: {claimed:,} open runs")
        started = time.perf_counter()
        census = conditions.census(store, now + timedelta(seconds=1))
        ctx.measurement(
            "console",
            "census",
            "s",
            [time.perf_counter() - started],
            tasks=count,
            not_ok=census.not_ok,
            digits=2,
        )
        with_runs = store.search_tasks(
            TaskFilter(type="bench", status=[TaskStatus.SCHEDULED]),
            limit=1,
        )
        task_id = with_runs[0].id or 1
        with server(store) as api:
            browser = httpx.Client(base_url=api.base_url, timeout=120)
            token = str(api.headers["authorization"]).split(" ", 1)[1]
            browser.post("/console/login", data={"token": token})
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:  # the background counts in
                live = browser.get("/console/live").json()["text"]
                unknown = "\u2013"
                if live.get("total:ERROR", unknown) != unknown and live["bench:hour"][0] != unknown:
                    break
                time.sleep(1.0)
            page = browser.get("/console/problems").text
            total = re.search(r"of ([\d,]+)\s+tasks not OK", page)
            problems = int(total.group(1).replace(",", "")) if total else 0
            log(f"console: {problems:,} problems listed")
            for name, path in _pages(task_id, max(1, -(-problems // 50))).items():
                serial = iter(range(10**9))

                def get(
                    http: httpx.Client = browser, path: str = path, serial: Any = serial
                ) -> None:
                    http.get(path.replace("{n}", str(next(serial)))).raise_for_status()

                get()
                samples = []
                for _ in range(20):
                    began = time.perf_counter()
                    get()
                    samples.append((time.perf_counter() - began) * 1000)
                ctx.emit(
                    {
                        "scenario": "console",
                        "measurement": f"page_{name}",
                        "tasks": count,
                        "open_runs": claimed,
                        "problems": problems,
                        "unit": "ms",
                        "p50": round(statistics.median(samples), 1),
                        "p99": _percentile(samples, 0.99),
                        "ratios": {
                            "p50_vs_300ms_target": ratio(statistics.median(samples), TARGET_MS)
                        },
                    }
                )
                pool = [
                    httpx.Client(base_url=api.base_url, cookies=browser.cookies, timeout=120)
                    for _ in range(CLIENTS)
                ]

                def loaded(
                    rng: random.Random, path: str = path, pool: list[httpx.Client] = pool
                ) -> None:
                    pool[rng.randrange(CLIENTS)].get(path.replace("{n}", str(rng.random())))

                latencies, rate = _load(seconds, loaded, clients=CLIENTS)
                for http in pool:
                    http.close()
                ctx.emit(
                    {
                        "scenario": "console",
                        "measurement": f"page_{name}_under_load",
                        "tasks": count,
                        "clients": CLIENTS,
                        "unit": "ms",
                        "p50": _percentile(latencies, 0.5),
                        "p99": _percentile(latencies, 0.99),
                        "requests_per_s": round(rate, 1),
                        "ratios": {},
                    }
                )
            browser.close()
