"""idle: ``swh scheduler start-runner`` (a subprocess) for a while over a
table of tasks none of which is due → CPU seconds per minute used by the
runner process and by its PostgreSQL backends (from /proc), with a 10,000-task
table as the baseline in the same run."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from swh_like_scheduler.store import SQLAlchemyStore

from ..common import (
    Context,
    bench_type,
    cpu_seconds,
    fill_tasks,
    log,
    ratio,
    raw,
    scratch_store,
    unique_queue,
    utcnow,
)

BASELINE = 10_000
SIZE = 1_000_000
QUICK_SIZE = 100_000
WINDOW = 60.0
QUICK_WINDOW = 10.0
#: let the runner start and make its first pass before measuring
SETTLE = 5.0


def backends(store: SQLAlchemyStore, database: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected to ``database`` (but ours)."""
    rows = raw(
        store,
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
        " AND backend_type = 'client backend'",
        (database,),
    )
    found = {pid: cpu_seconds(pid) for (pid,) in rows}
    return {pid: cpu for pid, cpu in found.items() if cpu is not None}


def task_rows_read(store: SQLAlchemyStore) -> int:
    """Rows of ``task`` read by sequential scans so far (pg_stat_user_tables)."""
    raw(store, "SELECT pg_stat_clear_snapshot()")
    return int(
        raw(store, "SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'task'")[0][0]
    )


def measure_once(
    ctx: Context, store: SQLAlchemyStore, database: str, window: float
) -> tuple[float, float | None, float]:
    """(runner CPU s/min, PostgreSQL backends CPU s/min or None if unreadable,
    task rows read by sequential scans per minute)."""
    swh = str(Path(sys.executable).with_name("swh"))
    env = {
        **os.environ,
        "SWH_SCHEDULER_DB_URL": store.engine.url.render_as_string(hide_password=False),
    }
    log_path = Path(tempfile.mkstemp(prefix="swh-bench-runner-", suffix=".log")[1])
    with open(log_path, "ab") as out:
        process = subprocess.Popen(
            [
                swh,
                "scheduler",
                "start-runner",
                "--broker-url",
                ctx.redis,
                "--republish-after",
                "5 min",
            ],
            env=env,
            stdout=out,
            stderr=out,
        )
    try:
        time.sleep(SETTLE)
        if process.poll() is not None:
            raise RuntimeError(f"the runner exited: {log_path.read_text()[-2000:]}")
        runner_before = cpu_seconds(process.pid) or 0.0
        pg_before = backends(store, database)
        scanned_before = task_rows_read(store)
        time.sleep(window)
        runner_after = cpu_seconds(process.pid) or 0.0
        pg_after = backends(store, database)
        time.sleep(1.0)  # backends report their table statistics about once a second
        scanned = task_rows_read(store) - scanned_before
    finally:
        process.terminate()
        process.wait(30)
        log_path.unlink(missing_ok=True)
    per_minute = 60.0 / window
    runner = (runner_after - runner_before) * per_minute
    scanned_per_minute = scanned * per_minute
    if not pg_after and not pg_before:
        return runner, None, scanned_per_minute
    # a backend that appeared during the window counts from zero
    pg = sum(cpu - pg_before.get(pid, 0.0) for pid, cpu in pg_after.items())
    return runner, pg * per_minute, scanned_per_minute


def measure(
    ctx: Context, count: int, window: float
) -> tuple[list[float], list[float], list[float]]:
    runner: list[float] = []
    postgres: list[float] = []
    scans: list[float] = []
    database = "swh_bench_idle"
    with scratch_store(ctx.postgres, database) as store:
        bench_type(store, unique_queue("idle"), max_queue_length=None)
        fill_tasks(store, count, now=utcnow(), due=0, progress=count >= 1_000_000)
        raw(store, "UPDATE task SET next_run = next_run + interval '1 day' WHERE id = 1")
        assert raw(store, "SELECT count(*) FROM task WHERE next_run <= now()")[0][0] == 0
        for attempt in range(ctx.repeat):
            cpu, pg, scanned = measure_once(ctx, store, database, window)
            runner.append(cpu)
            scans.append(scanned)
            if pg is not None:
                postgres.append(pg)
            log(
                f"idle {count:,} #{attempt}: runner {cpu:.3f} CPU s/min,"
                f" postgres {pg or 0:.3f} CPU s/min, {scanned:,.0f} task rows seq-scanned/min"
            )
    return runner, postgres, scans


def run(ctx: Context) -> None:
    window = QUICK_WINDOW if ctx.quick else WINDOW
    size = QUICK_SIZE if ctx.quick else SIZE
    results = {count: measure(ctx, count, window) for count in (BASELINE, size)}
    base_runner, base_pg, base_scans = results[BASELINE]
    for count, (runner, postgres, scans) in results.items():
        params = {"tasks": count, "window_s": window}
        ctx.measurement(
            "idle",
            "runner_cpu",
            "CPU s/min",
            runner,
            ratios={
                f"vs_{BASELINE}": ratio(statistics.median(runner), statistics.median(base_runner))
            },
            **params,
        )
        if postgres:
            ctx.measurement(
                "idle",
                "postgres_backends_cpu",
                "CPU s/min",
                postgres,
                ratios={
                    f"vs_{BASELINE}": ratio(statistics.median(postgres), statistics.median(base_pg))
                }
                if base_pg
                else {},
                **params,
            )
        else:
            ctx.note("idle", tasks=count, postgres_backends_cpu="not readable from /proc")
        ctx.measurement(
            "idle",
            "task_rows_seq_scanned",
            "rows/min",
            scans,
            ratios={
                f"vs_{BASELINE}": ratio(statistics.median(scans), statistics.median(base_scans))
            },
            digits=0,
            **params,
        )
