"""Dispatch throughput: one runner pass over N ready tasks, beside a plain
``apply_async`` loop to the same broker, measured in the same run.

    python benchmarks/dispatch.py --tasks 100000 --broker redis://127.0.0.1:6379/0
    python benchmarks/dispatch.py --tasks 100000 --broker amqp://guest:guest@127.0.0.1:5672//

Prints one JSON line per repetition and a summary line (median, min, max, ratios).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg import sql

from swh_like_scheduler import migrations
from swh_like_scheduler.celery_factory import make_app
from swh_like_scheduler.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.runner import tick
from swh_like_scheduler.store import SQLAlchemyStore

SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def fresh_store(name: str) -> SQLAlchemyStore:
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    store = SQLAlchemyStore.from_url(f"postgresql://postgres@127.0.0.1:5432/{name}")
    migrations.upgrade(store.engine)
    return store


def drop(name: str) -> None:
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def purge(app, queue: str) -> None:  # type: ignore[no-untyped-def]
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)
        conn.default_channel.queue_delete(queue)


def runner_pass(store: SQLAlchemyStore, app, count: int, queue: str) -> float:  # type: ignore[no-untyped-def]
    now = datetime.now(tz=UTC)
    store.create_task_type(
        TaskType(type="bench", backend_name="bench.noop", queue=queue, max_queue_length=count)
    )
    store.import_tasks(
        (
            Task(
                type="bench",
                args=(n,),
                kwargs={"url": f"https://forge.example/{n}"},
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(hours=1),
                next_run=now - timedelta(hours=1),
                deadline=now + timedelta(seconds=n),
            )
            for n in range(count)
        ),
        now=now,
        batch_size=10_000,
    )
    with store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE task")
    started = time.perf_counter()
    published = 0
    while published < count:
        report = tick(store, app, datetime.now(tz=UTC))
        if report.errors:
            raise RuntimeError(report.errors)
        published += report.published
    return time.perf_counter() - started


def apply_async_loop(app, count: int, queue: str) -> float:  # type: ignore[no-untyped-def]
    signature = app.signature("bench.noop")
    started = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for n in range(count):
            signature.apply_async(
                args=(n,),
                kwargs={"url": f"https://forge.example/{n}"},
                task_id=str(uuid.uuid4()),
                queue=queue,
                producer=producer,
            )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument(
        "--baseline-tasks",
        type=int,
        default=20_000,
        help="messages sent by the apply_async loop (its rate is compared)",
    )
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    app = make_app(config_module=None, broker_url=options.broker, load_workers=False)
    ours, baseline = [], []
    for attempt in range(options.repeat):
        queue = f"bench-dispatch-{uuid.uuid4().hex[:8]}"
        name = "swh_bench_dispatch"
        store = fresh_store(name)
        try:
            seconds = runner_pass(store, app, options.tasks, queue)
        finally:
            store.close()
            drop(name)
            purge(app, queue)
        base = apply_async_loop(app, options.baseline_tasks, queue)
        purge(app, queue)
        ours.append(options.tasks / seconds)
        baseline.append(options.baseline_tasks / base)
        print(
            json.dumps(
                {
                    "scenario": "dispatch",
                    "attempt": attempt,
                    "broker": options.broker,
                    "tasks": options.tasks,
                    "runner_tasks_per_s": round(ours[-1]),
                    "apply_async_per_s": round(baseline[-1]),
                    "ratio": round(ours[-1] / baseline[-1], 2),
                }
            ),
            flush=True,
        )
    print(
        json.dumps(
            {
                "scenario": "dispatch",
                "summary": True,
                "broker": options.broker,
                "tasks": options.tasks,
                "runner_tasks_per_s": {
                    "median": round(statistics.median(ours)),
                    "min": round(min(ours)),
                    "max": round(max(ours)),
                },
                "apply_async_per_s": {
                    "median": round(statistics.median(baseline)),
                    "min": round(min(baseline)),
                    "max": round(max(baseline)),
                },
                "ratio_median": round(statistics.median(ours) / statistics.median(baseline), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
