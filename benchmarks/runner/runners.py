"""runners: issue 14's table rerun with real processes. N ready tasks, no
worker; one or three ``swh scheduler start-runner`` processes started
together publish them to a Redis queue. Measured: seconds from their start
until the N-th message is in the queue (start-up included), and the longest
statement any of them ran (sampled from ``pg_stat_activity`` every 20 ms;
``ANALYZE`` excluded: it is the cure, not the claim). Each variant runs with
the planner's statistics fresh and with them deleted (as right after a bulk
creation, before autovacuum).

Checked after each run: exactly N runs, one per task, and N messages in the
queue (no task dispatched twice, none missed)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

from swh_like_scheduler.store import SQLAlchemyStore

from ..common import (
    Context,
    bench_type,
    fill_tasks,
    log,
    ratio,
    raw,
    scratch_store,
    unique_queue,
    utcnow,
)

SIZES = (10_000, 50_000, 200_000)
QUICK_SIZES = (10_000, 50_000)
DATABASE = "swh_bench_runners"
TIMEOUT = 600.0

#: (name, runner processes, --claimers)
VARIANTS = (
    ("one", 1, 2),
    ("three", 3, 2),
    ("three_claimers_1", 3, 1),
)


class LongestStatement(threading.Thread):
    """Samples the active statements of ``database`` (but ours) until stopped:
    the longest ``now() - query_start`` seen, and that statement's text."""

    def __init__(self, store: SQLAlchemyStore, database: str) -> None:
        super().__init__(name="bench-statement-sampler", daemon=True)
        self.store, self.database = store, database
        self.longest, self.text = 0.0, ""
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.02):
            rows = raw(
                self.store,
                "SELECT extract(epoch FROM clock_timestamp() - query_start), query"
                " FROM pg_stat_activity WHERE datname = %s AND state = 'active'"
                " AND pid <> pg_backend_pid() AND query NOT ILIKE 'ANALYZE%%'",
                (self.database,),
            )
            for seconds, query in rows:
                if seconds is not None and float(seconds) > self.longest:
                    self.longest, self.text = float(seconds), " ".join(str(query).split())[:120]


def runners(
    ctx: Context, store: SQLAlchemyStore, queue: str, count: int, processes: int, claimers: int
) -> float:
    """Start ``processes`` runners at once; seconds until ``count`` messages
    are in ``queue`` (the runners are then stopped with SIGTERM)."""
    swh = str(Path(sys.executable).with_name("swh"))
    env = {
        **os.environ,
        "SWH_SCHEDULER_DB_URL": store.engine.url.render_as_string(hide_password=False),
    }
    command = [swh, "scheduler", "start-runner", "--broker-url", ctx.redis, "--no-monitor"]
    command += ["--claimers", str(claimers), "--period", "60"]
    broker = redis.Redis.from_url(ctx.redis)
    logs = [
        Path(tempfile.mkstemp(prefix="swh-bench-runner-", suffix=".log")[1])
        for _ in range(processes)
    ]
    started = time.perf_counter()
    children = []
    for path in logs:
        with open(path, "ab") as out:
            children.append(subprocess.Popen(command, env=env, stdout=out, stderr=out))
    try:
        while int(broker.llen(queue)) < count:
            for child, path in zip(children, logs, strict=True):
                if child.poll() is not None:
                    raise RuntimeError(f"a runner exited: {path.read_text()[-2000:]}")
            if time.perf_counter() - started > TIMEOUT:
                raise RuntimeError(f"{broker.llen(queue)} of {count} published in {TIMEOUT} s")
            time.sleep(0.01)
        return time.perf_counter() - started
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for path in logs:
            path.unlink(missing_ok=True)


def measure(
    ctx: Context, count: int, processes: int, claimers: int, *, stats: bool
) -> tuple[float, float, str]:
    """(seconds, longest statement s, its text) for one variant."""
    queue = unique_queue("runners")
    broker = redis.Redis.from_url(ctx.redis)
    with scratch_store(ctx.postgres, DATABASE) as store:
        bench_type(store, queue, max_queue_length=count)
        raw(store, "ALTER TABLE task SET (autovacuum_enabled = false)")
        fill_tasks(store, count, now=utcnow())
        if stats:
            raw(store, "ANALYZE task")
        else:  # as if never analysed (superuser: the benchmark's own server)
            raw(store, "DELETE FROM pg_statistic WHERE starelid = 'task'::regclass")
            raw(store, "UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE relname = 'task'")
        sampler = LongestStatement(store, DATABASE)
        sampler.start()
        try:
            seconds = runners(ctx, store, queue, count, processes, claimers)
        finally:
            sampler.halt.set()
            sampler.join(10)
        runs, tasks = raw(store, "SELECT count(*), count(DISTINCT task_id) FROM task_run")[0]
        messages = int(broker.llen(queue))
        broker.delete(queue)
        if not (runs == tasks == messages == count):
            raise RuntimeError(f"{count} tasks: {runs} runs of {tasks} tasks, {messages} messages")
        return seconds, sampler.longest, sampler.text


def run(ctx: Context) -> None:
    for count in QUICK_SIZES if ctx.quick else SIZES:
        seconds: dict[str, list[float]] = {}
        longest: dict[str, list[float]] = {}
        for attempt in range(ctx.repeat):
            for name, processes, claimers in VARIANTS:
                for stats in (True, False):
                    key = name if stats else f"{name}_no_stats"
                    took, worst, text = measure(ctx, count, processes, claimers, stats=stats)
                    seconds.setdefault(key, []).append(took)
                    longest.setdefault(key, []).append(worst)
                    log(
                        f"runners {count:,} {key} #{attempt}: {took:.2f}s,"
                        f" longest statement {worst:.2f}s ({text})"
                    )
        base = statistics.median(seconds["one"])
        for key, samples in seconds.items():
            ctx.measurement(
                "runners",
                key,
                "s",
                samples,
                ratios={"vs_one_analysed": ratio(statistics.median(samples), base)},
                digits=2,
                tasks=count,
                longest_statement_s=round(max(longest[key]), 2),
            )
