"""Bulk import speed: `swh scheduler task schedule` of N tasks into PostgreSQL.

Baseline in the same run: PostgreSQL's own ``COPY`` of the same N rows into
an identical table (the database's ceiling, with no parsing, validation or
deduplication). Prints one JSON line with both timings and their ratio.

    python benchmarks/intake/import_tasks.py --tasks 1000000 \
        --server postgresql://postgres@127.0.0.1:5432/postgres
    python benchmarks/intake/import_tasks.py --tasks 100000 --crons 1440   # cron tasks
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

from swh_like_scheduler.store import make_engine, migrations


def write_input(path: Path, count: int, crons: int = 0) -> None:
    """``count`` adaptive tasks, or with ``crons`` cron tasks (Europe/Paris)
    spread over that many distinct daily expressions."""
    with path.open("w") as out:
        for n in range(count):
            row: dict[str, object] = {
                "args": [f"https://forge.example/repo/{n}"],
                "kwargs": {"n": n},
            }
            if crons:
                k = n % crons
                row.update(cron=f"{k % 60} {k // 60 % 24} * * *", tz="Europe/Paris")
                row.update(cron_max_duration="1h")
            out.write(json.dumps(row) + "\n")


def fresh_database(server: str, name: str) -> str:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = server.rsplit("/", 1)[0]
    return f"{base}/{name}"


def drop_database(server: str, name: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def run_import(url: str, input_path: Path, task_type: str = "sleep") -> float:
    env = {**os.environ, "SWH_SCHEDULER_DB_URL": url}
    swh = str(Path(sys.executable).with_name("swh"))
    subprocess.run(
        [swh, "scheduler", "task-type", "register"], env=env, check=True, capture_output=True
    )
    if task_type != "sleep":  # with retries: cron tasks get the retry check
        subprocess.run(
            [
                *(swh, "scheduler", "task-type", "add", task_type, "swh_like_workers.sleep.sleep"),
                *("--num-retries", "2", "--retry-delay", "5 min"),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
    started = time.perf_counter()
    subprocess.run(
        [
            swh,
            "scheduler",
            "task",
            "schedule",
            "-q",
            "-t",
            task_type,
            "--batch-size",
            "5000",
            str(input_path),
        ],
        env=env,
        check=True,
    )
    return time.perf_counter() - started


def run_copy(url: str, count: int) -> float:
    """COPY the same number of rows, as the store would write them, into a twin table."""
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("CREATE TABLE task_copy (LIKE task INCLUDING ALL)")
        started = time.perf_counter()
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY task_copy (type, arguments, arguments_hash, schedule_kind, status, priority,"
                " next_run, deadline, current_interval, tz, blackout_periods, dont_run_on_nodes,"
                " created_at, updated_at) FROM STDIN"
            ) as copy,
        ):
            for n in range(count):
                arguments = json.dumps(
                    {"args": [f"https://forge.example/repo/{n}"], "kwargs": {"n": n}}
                )
                copy.write_row(
                    (
                        "sleep",
                        arguments,
                        f"{n:064x}",
                        "adaptive",
                        "waiting",
                        "normal",
                        "2026-01-01T00:00:00Z",
                        "2026-01-01T01:00:00Z",
                        "1 hour",
                        "UTC",
                        "[]",
                        "[]",
                        "2026-01-01T00:00:00Z",
                        "2026-01-01T00:00:00Z",
                    )
                )
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument(
        "--crons",
        type=int,
        default=0,
        help="Cron tasks over this many distinct daily expressions (default: adaptive tasks).",
    )
    parser.add_argument(
        "--server",
        default=os.environ.get(
            "SWH_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
        ),
    )
    options = parser.parse_args()
    server = options.server.replace("+psycopg", "")
    name = "swh_bench_import"
    url = fresh_database(server, name).replace("postgresql://", "postgresql+psycopg://")
    engine = make_engine(url)
    migrations.upgrade(engine)
    engine.dispose()
    try:
        with tempfile.TemporaryDirectory() as folder:
            input_path = Path(folder) / "tasks.jsonl"
            write_input(input_path, options.tasks, options.crons)
            ours = run_import(url, input_path, "cron-sleep" if options.crons else "sleep")
        ceiling = run_copy(url, options.tasks)
    finally:
        drop_database(server, name)
    print(
        json.dumps(
            {
                "scenario": "import",
                "tasks": options.tasks,
                "crons": options.crons,
                "swh_schedule_s": round(ours, 2),
                "swh_schedule_tasks_per_s": round(options.tasks / ours),
                "copy_baseline_s": round(ceiling, 2),
                "ratio_vs_copy": round(ours / ceiling, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
