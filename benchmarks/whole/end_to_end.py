"""end-to-end: K no-op tasks through runner → a real ``celery worker``
subprocess → listener, until every run is recorded; beside the same worker
fed by a plain ``apply_async`` loop, until every ``task-succeeded`` event is
seen (RabbitMQ when it is up, else Redis).

``ours`` runs the body behind the start guard (``bench.guarded``, the
product's base class: one database transaction per start); ``unguarded``
runs the same body as a bare Celery task through the same runner and
listener, which isolates what the guard costs."""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import psycopg

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.listener import Listener, ListenerOptions
from swh_like_scheduler.store import SQLAlchemyStore

from ..common import (
    GUARDED_TASK,
    NOOP_TASK,
    REPO,
    Context,
    bench_type,
    broker_kind,
    celery_app,
    fill_tasks,
    log,
    purge,
    ratio,
    reset_tasks,
    scratch_store,
    stop_process,
    task_arguments,
    unique_queue,
    utcnow,
)
from ..cpu import CpuMeter, median_parts

TASKS = 5_000
QUICK_TASKS = 2_000
CONCURRENCY = 2
TIMEOUT = 600.0


@contextmanager
def worker(broker: str, queue: str, app: Any, db_url: str) -> Iterator[subprocess.Popen[bytes]]:
    """A ``celery worker`` subprocess (prefork, ``-E``) serving ``queue``."""
    name = f"bench-{uuid.uuid4().hex[:6]}@localhost"
    log_path = Path(tempfile.mkstemp(prefix="swh-bench-worker-", suffix=".log")[1])
    command = [sys.executable, "-m", "celery", "-A", "benchmarks.worker_app", "worker"]
    command += ["-Q", queue, "-E", "-c", str(CONCURRENCY), "-P", "prefork", "-n", name]
    command += ["--without-gossip", "--without-mingle", "-l", "WARNING"]
    env = {**os.environ, "SWH_BENCH_BROKER_URL": broker, "SWH_SCHEDULER_DB_URL": db_url}
    with open(log_path, "ab") as out:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 60
        while not app.control.ping(destination=[name], timeout=1.0):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start; see {log_path}")
        yield process
    finally:
        stop_process(process, log_path)


OPEN_RUNS = "SELECT count(*) FROM task_run WHERE status IN ('scheduled', 'started')"


@contextmanager
def open_runs(store: SQLAlchemyStore) -> Iterator[Callable[[], int]]:
    """How many runs are open, read over one connection kept for the whole
    measurement (a connection per poll, every 20 ms, cost a PostgreSQL
    backend each: CPU the parts measured were charged for)."""
    url = store.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:

        def count() -> int:
            row = conn.execute(OPEN_RUNS).fetchone()
            return int(row[0]) if row else 0

        yield count


def ours(
    store: SQLAlchemyStore,
    app: Any,
    count: int,
    *,
    listener_store: SQLAlchemyStore | None = None,
    still_open: Callable[[], int] | None = None,
    on_ready: Callable[[], None] | None = None,
    meter: CpuMeter | None = None,
) -> float:
    """Runner passes (on ``store``) until ``count`` are published, then wait
    until the listener (on ``listener_store``, default ``store``) recorded
    every run's end (``still_open``: how many runs are open, default read
    through ``store``). ``on_ready`` is called once the listener is up,
    just before the clock starts; ``meter`` measures the CPU by part over
    the timed interval."""
    queue = unique_queue("e2e-events")
    options = ListenerOptions(queue_name=queue, wakeup_workers=False, retry_delay=0.5)
    stop = threading.Event()
    target = listener_store or store
    listener = Listener(app, target, rng=random.Random(0), options=options, stop=stop)
    polling = ExitStack()
    count_open = still_open or polling.enter_context(open_runs(store))
    thread = threading.Thread(target=listener.run, name="bench-listener", daemon=True)
    thread.start()
    try:
        if not listener.ready.wait(30):
            raise RuntimeError("the listener did not start")
        if on_ready is not None:
            on_ready()
        if meter is not None:
            meter.start()
        started = time.perf_counter()
        published = 0
        while published < count:
            report = tick(store, app, utcnow())
            if report.errors:
                raise RuntimeError(report.errors)
            published += report.published
        while count_open():
            if time.perf_counter() - started > TIMEOUT:
                raise RuntimeError(f"{count_open()} runs still open after {TIMEOUT}s")
            time.sleep(0.02)
        seconds = time.perf_counter() - started
        if meter is not None:
            meter.stop()
        return seconds
    finally:
        polling.close()
        stop.set()
        thread.join(30)
        purge(app, queue)


def plain(app: Any, count: int, queue: str, meter: CpuMeter | None = None) -> float:
    """A plain ``apply_async`` loop; time until every task-succeeded is seen
    (``meter``: the CPU by part over that time)."""
    ids = [str(uuid.uuid4()) for _ in range(count)]
    wanted = set(ids)
    seen: set[str] = set()
    done = threading.Event()

    def on_succeeded(event: dict[str, Any]) -> None:
        if event.get("uuid") in wanted:
            seen.add(event["uuid"])
            if len(seen) == count:
                done.set()

    receiver_box: list[Any] = []

    def receive() -> None:
        with app.connection_for_read() as conn:
            receiver = app.events.Receiver(
                conn, handlers={"task-succeeded": on_succeeded}, node_id=unique_queue("ev")
            )
            receiver_box.append(receiver)
            receiver.capture(limit=None, timeout=None, wakeup=False)

    thread = threading.Thread(target=receive, name="bench-receiver", daemon=True)
    thread.start()
    time.sleep(2.0)  # the receiver's queue is declared and consumed
    signature = app.signature(NOOP_TASK)
    if meter is not None:
        meter.start()
    started = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for n, task_id in enumerate(ids):
            args, kwargs = task_arguments(n)
            signature.apply_async(
                args=args, kwargs=kwargs, task_id=task_id, queue=queue, producer=producer
            )
    finished = done.wait(TIMEOUT)
    seconds = time.perf_counter() - started
    if meter is not None:
        meter.stop()
    if receiver_box:
        receiver_box[0].should_stop = True
    thread.join(10)
    if not finished:
        raise RuntimeError(f"only {len(seen)} of {count} task-succeeded events seen")
    return seconds


def run(ctx: Context) -> None:
    count = QUICK_TASKS if ctx.quick else TASKS
    broker = ctx.amqp or ctx.redis
    kind = broker_kind(broker)
    app = celery_app(broker, worker_send_task_events=True, task_send_sent_event=False)
    queue = unique_queue("e2e")
    rates: dict[str, list[float]] = {"ours": [], "unguarded": [], "apply_async": []}
    cpu: dict[str, list[dict[str, float]]] = {name: [] for name in rates}
    with scratch_store(ctx.postgres, "swh_bench_e2e") as store:
        bench_type(store, queue, max_queue_length=count)
        fill_tasks(store, count, now=utcnow())
        db_url = store.engine.url.render_as_string(hide_password=False)
        try:
            with worker(broker, queue, app, db_url) as process:
                for attempt in range(ctx.repeat):
                    for name, task_name in (("ours", GUARDED_TASK), ("unguarded", NOOP_TASK)):
                        store.update_task_type("bench", backend_name=task_name)
                        reset_tasks(store, due_at=utcnow())
                        meter = CpuMeter(worker_pids=[process.pid])
                        rates[name].append(count / ours(store, app, count, meter=meter))
                        cpu[name].append(meter.per(count))
                        log(
                            f"  {name}: processes that ended: {meter.ended_names};"
                            f" outside the parts, CPU s: {meter.others}"
                        )
                    meter = CpuMeter(worker_pids=[process.pid])
                    rates["apply_async"].append(count / plain(app, count, queue, meter))
                    cpu["apply_async"].append(meter.per(count))
                    log(
                        f"end-to-end {kind} {count:,} #{attempt}: "
                        + ", ".join(f"{k} {v[-1]:,.0f} tasks/s" for k, v in rates.items())
                    )
                    for name, parts in cpu.items():
                        log(f"  CPU ms per run, {name}: " + cpu_text(parts[-1]))
        finally:
            purge(app, queue)
    mine, base = statistics.median(rates["ours"]), statistics.median(rates["apply_async"])
    params = {"broker": kind, "tasks": count, "concurrency": CONCURRENCY}
    ctx.measurement(
        "end-to-end",
        "ours",
        "tasks/s",
        rates["ours"],
        ratios={
            "ours/apply_async": ratio(mine, base),
            "ours/unguarded": ratio(mine, statistics.median(rates["unguarded"])),
        },
        digits=0,
        cpu_ms_per_run=median_parts(cpu["ours"]),
        **params,
    )
    for name in ("unguarded", "apply_async"):
        ctx.measurement(
            "end-to-end",
            name,
            "tasks/s",
            rates[name],
            digits=0,
            cpu_ms_per_run=median_parts(cpu[name]),
            **params,
        )


def cpu_text(parts: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
