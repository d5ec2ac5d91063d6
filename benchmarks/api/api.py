"""api: the HTTP API's cost, against the store it serves, in the same run.

- **bulk create**: N tasks created 1,000 per request through ``POST /tasks``
  (a real ``swh scheduler rpc-serve`` process) vs 1,000 per
  ``store.create_tasks`` call in this process: seconds and the ratio;
- **reads under load**: 8 client threads for a few seconds, each request a
  ``GET /tasks/{id}`` of a random id or a ``GET /tasks?limit=100`` page:
  latency p50 / p99 and requests per second; baseline, the same reads
  through the store in this process;
- **scrape**: ``GET /health``, ``/metrics``, ``/conditions`` (counts, and
  a page of tasks in ERROR) with 1M tasks and 100k open runs (100k and 10k
  with ``--quick``): p50 of 10 from one client, then p50 / p99 under 20
  clients at once; targets 50 ms for /health, 200 ms for /metrics.

PostgreSQL only (the production store)."""

from __future__ import annotations

import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.store import SQLAlchemyStore, TaskFilter

from ..common import Context, bench_type, fill_tasks, log, ratio, raw, scratch_store, utcnow

DATABASE = "swh_bench_api"
CHUNK = 1000
CLIENTS = 8


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server(store: SQLAlchemyStore) -> Iterator[httpx.Client]:
    """``rpc-serve`` on the store's database; a client with its token."""
    token = secrets.token_urlsafe(24)
    port = _free_port()
    env = {
        **os.environ,
        "SWH_SCHEDULER_DB_URL": store.engine.url.render_as_string(hide_password=False),
        "SWH_SCHEDULER_API_TOKENS": f"{token}:rw",
    }
    log_path = Path(tempfile.mkstemp(prefix="swh-bench-api-", suffix=".log")[1])
    swh = str(Path(sys.executable).with_name("swh"))
    command = [
        swh,
        "scheduler",
        "rpc-serve",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--rate-limit",
        "0",  # the benchmark's clients share one token
    ]
    with open(log_path, "ab") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    client = httpx.Client(base_url=url, headers=headers, timeout=120)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if client.get("/health").status_code in (200, 503):
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"rpc-serve did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.05)
        yield client
    finally:
        client.close()
        process.terminate()
        process.wait(30)
        log_path.unlink(missing_ok=True)


def _bodies(count: int, offset: int) -> list[list[dict[str, object]]]:
    return [
        [
            {"type": "bench", "args": [n], "kwargs": {"url": f"https://forge.example/{n}"}}
            for n in range(start, min(start + CHUNK, offset + count))
        ]
        for start in range(offset, offset + count, CHUNK)
    ]


def bulk_create(ctx: Context, count: int) -> None:
    direct: list[float] = []
    through: list[float] = []
    for _ in range(ctx.repeat):
        with scratch_store(ctx.postgres, DATABASE) as store:
            task_type = bench_type(store, "bench-api", None)
            now = utcnow()
            chunks = _bodies(count, 0)
            started = time.perf_counter()
            for chunk in chunks:
                tasks = [
                    task_from_input({k: v for k, v in t.items() if k != "type"}, task_type, now=now)
                    for t in chunk
                ]
                store.create_tasks(tasks, now=now)
            direct.append(time.perf_counter() - started)
            with server(store) as client:
                chunks = _bodies(count, count)
                started = time.perf_counter()
                for chunk in chunks:
                    answer = client.post("/tasks", json={"tasks": chunk})
                    answer.raise_for_status()
                through.append(time.perf_counter() - started)
            assert store.count_tasks() == 2 * count
    ctx.measurement("api", "bulk_create_store", "s", direct, tasks=count, digits=2)
    ctx.measurement(
        "api",
        "bulk_create_http",
        "s",
        through,
        tasks=count,
        digits=2,
        ratios={"vs_store": ratio(statistics.median(through), statistics.median(direct))},
    )


def _load(
    seconds: float, request: Callable[[random.Random], None], *, clients: int = CLIENTS
) -> tuple[list[float], float]:
    """Latencies (ms) of ``clients`` threads calling ``request`` for ``seconds``; requests/s."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    stop = time.monotonic() + seconds

    def client(n: int) -> None:
        rng = random.Random(n)
        while time.monotonic() < stop:
            began = time.perf_counter()
            request(rng)
            latencies[n].append((time.perf_counter() - began) * 1000)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    flat = [x for samples in latencies for x in samples]
    return flat, len(flat) / (time.perf_counter() - started)


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def reads(ctx: Context, count: int, seconds: float) -> None:
    with scratch_store(ctx.postgres, DATABASE) as store:
        bench_type(store, "bench-api", None)
        fill_tasks(store, count, now=utcnow())
        raw(store, "ANALYZE task")
        top = store.count_tasks()

        def local(rng: random.Random) -> None:
            if rng.random() < 0.5:
                store.get_tasks([rng.randint(1, top)])
            else:
                store.search_tasks(TaskFilter(), after_id=rng.randint(0, top), limit=100)

        local_ms, local_rate = _load(seconds, local)
        with server(store) as client:
            pool = [
                httpx.Client(base_url=client.base_url, headers=client.headers, timeout=60)
                for _ in range(CLIENTS)
            ]

            def remote(rng: random.Random) -> None:
                http = pool[threading.get_ident() % CLIENTS]
                if rng.random() < 0.5:
                    http.get(f"/tasks/{rng.randint(1, top)}").raise_for_status()
                else:
                    http.get("/tasks", params={"after_id": rng.randint(0, top), "limit": 100})

            http_ms, http_rate = _load(seconds, remote)
            for http in pool:
                http.close()
    for name, samples, rate in (
        ("reads_store", local_ms, local_rate),
        ("reads_http", http_ms, http_rate),
    ):
        ctx.emit(
            {
                "scenario": "api",
                "measurement": name,
                "tasks": count,
                "clients": CLIENTS,
                "unit": "ms",
                "p50": _percentile(samples, 0.5),
                "p99": _percentile(samples, 0.99),
                "requests_per_s": round(rate, 1),
                "ratios": {}
                if name == "reads_store"
                else {"p50_vs_store": ratio(_percentile(http_ms, 0.5), _percentile(local_ms, 0.5))},
            }
        )


#: the observation endpoints measured, and whether a 503 is an answer
#: (/health says degraded: no runner runs during the benchmark)
SCRAPED = ("/health", "/metrics", "/conditions", "/conditions?show=ERROR")
#: concurrent clients of the scrape under load
SCRAPERS = 20


def scrape(ctx: Context, count: int, seconds: float) -> None:
    """The observation endpoints with ``count`` tasks, a fifth of them due
    and half of those claimed (``count / 10`` open runs): one client (p50
    of 10), then :data:`SCRAPERS` clients at once for ``seconds`` (p50 /
    p99). Targets: /health under 50 ms, /metrics under 200 ms."""
    with scratch_store(ctx.postgres, DATABASE) as store:
        bench_type(store, "bench-api", None)
        log(f"api: filling {count:,} tasks for the scrape")
        now = utcnow()
        fill_tasks(store, count, now=now, due=count // 5)
        claimed = 0
        while claimed < count // 10:
            claimed += len(store.claim_ready_tasks("bench", now=now, limit=5000))
        raw(store, "ANALYZE task")
        raw(store, "ANALYZE task_run")
        log(f"api: {claimed:,} open runs")
        with server(store) as client:
            # the steady state: the background counts (tasks per condition,
            # open runs) done, as they are between two of them
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                text = client.get("/metrics").text
                if "counts_age_seconds" in text and "runs_open_age_seconds" in text:
                    break
                time.sleep(1.0)
            for path in SCRAPED:
                name = path.strip("/").replace("?show=ERROR", "_errors")

                def get(http: httpx.Client = client, path: str = path) -> None:
                    answer = http.get(path)
                    if answer.status_code not in (200, 503):
                        answer.raise_for_status()

                get()  # warm (and start the background counts)
                samples = []
                for _ in range(10):
                    began = time.perf_counter()
                    get()
                    samples.append((time.perf_counter() - began) * 1000)
                target = {"health": 50.0, "metrics": 200.0}.get(name)
                ctx.measurement(
                    "api",
                    f"scrape_{name}",
                    "ms",
                    samples,
                    tasks=count,
                    open_runs=claimed,
                    digits=1,
                    ratios={}
                    if target is None
                    else {f"vs_{target:.0f}ms_target": ratio(statistics.median(samples), target)},
                )
                # one client, its pool holds a connection per thread
                loaded, rate = _load(seconds, lambda rng, get=get: get(), clients=SCRAPERS)
                ctx.emit(
                    {
                        "scenario": "api",
                        "measurement": f"scrape_{name}_under_load",
                        "tasks": count,
                        "open_runs": claimed,
                        "clients": SCRAPERS,
                        "unit": "ms",
                        "p50": _percentile(loaded, 0.5),
                        "p99": _percentile(loaded, 0.99),
                        "requests_per_s": round(rate, 1),
                        "ratios": {},
                    }
                )


def run(ctx: Context) -> None:
    bulk_create(ctx, 20_000 if ctx.quick else 100_000)
    reads(ctx, 100_000, 5.0 if ctx.quick else 15.0)
    scrape(ctx, 100_000 if ctx.quick else 1_000_000, 3.0 if ctx.quick else 10.0)
