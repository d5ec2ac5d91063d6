"""topup: how busy a worker stays behind a small ``max_queue_length``.

One worker slot (a threads pool of 1, prefetch 1), a type whose queue holds
at most ``LIMIT`` messages, ``RUNS`` ready tasks whose body sleeps ``NAP``
seconds, and a runner whose period (10 s) is far longer than a queue takes
to drain; no wake-up channel. Measured: the wall time from the first pass
to the last run's end, and the worker's busy share (the runs' work over
that time), with the runner topping the queue up as it drains against the
same runner waiting for its period (``top_up=False``: what it did before),
on Redis and on RabbitMQ."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from celery.contrib.testing.worker import start_worker

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.runner import loop
from swh_like_scheduler.runner.wakeup import SleepWaker

from ..common import Context, log, ratio, scratch_store

DATABASE = "swh_bench_topup"
PERIOD = 10.0
LIMIT = 20
NAP = 0.2


def _once(ctx: Context, broker: str, runs: int, top_up: bool) -> tuple[float, int]:
    """(wall seconds until every run ended, passes)."""
    app = make_app(
        config_module=None,
        broker_url=broker,
        load_workers=False,
        task_ignore_result=True,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
    )
    ended: list[float] = []

    @app.task(name="bench.nap", shared=False)
    def nap(*args: Any) -> dict[str, str]:
        time.sleep(NAP)
        ended.append(time.monotonic())
        return {"status": "eventful"}

    name = f"nap{uuid.uuid4().hex[:6]}"
    with scratch_store(ctx.postgres, DATABASE) as store:
        store.create_task_type(
            TaskType(type=name, backend_name="bench.nap", queue=name, max_queue_length=LIMIT)
        )
        now = datetime.now(tz=UTC) - timedelta(seconds=1)
        store.create_tasks(
            [
                Task(
                    type=name,
                    args=(n,),
                    schedule_kind=ScheduleKind.ONESHOT,
                    next_run=now,
                    deadline=now + timedelta(seconds=n),
                )
                for n in range(runs)
            ],
            now=now,
        )
        stop = threading.Event()
        passes: list[object] = []
        steps = loop.RunnerLoop(store, app, period=PERIOD, on_pass=passes.append, top_up=top_up)
        with start_worker(
            app, pool="threads", concurrency=1, perform_ping_check=False, queues=[name]
        ):
            began = time.monotonic()
            runner = threading.Thread(
                target=loop.run, args=(steps, SleepWaker(stop, poll=PERIOD)), kwargs={"stop": stop}
            )
            runner.start()
            deadline = began + runs * NAP * 10 + 60
            while len(ended) < runs and time.monotonic() < deadline:
                time.sleep(0.05)
            stop.set()
            runner.join(timeout=60)
        if len(ended) < runs:
            raise RuntimeError(f"only {len(ended)} of {runs} runs ended")
        return max(ended) - began, len(passes)


def run(ctx: Context) -> None:
    runs = 50 if ctx.quick else 200
    brokers = {"redis": ctx.redis, "rabbitmq": ctx.amqp}
    for label, broker in brokers.items():
        if broker is None:
            continue
        results = {}
        for top_up in (False, True):
            log(f"topup: {label}, top_up={top_up}, {runs} runs of {NAP} s")
            results[top_up] = _once(ctx, broker, runs, top_up)
        work = runs * NAP
        (before, passes_before), (after, passes_after) = results[False], results[True]
        ctx.emit(
            {
                "scenario": "topup",
                "measurement": f"worker_busy_{label}",
                "runs": runs,
                "max_queue_length": LIMIT,
                "period_s": PERIOD,
                "unit": "share",
                "busy_topping_up": round(work / after, 3),
                "busy_waiting_for_period": round(work / before, 3),
                "wall_s": {"topping_up": round(after, 1), "waiting": round(before, 1)},
                "passes": {"topping_up": passes_after, "waiting": passes_before},
                "ratios": {"wall_vs_waiting": ratio(after, before)},
            }
        )
