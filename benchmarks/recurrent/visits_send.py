"""visits-send: ``schedule-recurrent``'s steps sending every due origin of a
world to the broker (visits/s, Redis and RabbitMQ), against the runner's
own pass over as many ready tasks in the same run (runs/s): the ratio says
what a visit costs beside a run.

The world is :func:`benchmarks.visits.visits.fill`'s (100k origins;
``--quick``: 10k); the visit type's queue limit is the world's size, so the
steps send 10,000 at a time (``STEP_LIMIT``) until nothing is left to send,
with one policy (``oldest_scheduled_first``: every origin out of its
cooldowns).
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import Any

from swh_like_scheduler.broker.port import CeleryBroker
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.recurrent.scheduler import schedule_step
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.policy import VisitPolicy, VisitSettings

from ..common import (
    Context,
    bench_type,
    broker_kind,
    celery_app,
    fill_tasks,
    log,
    purge,
    ratio,
    raw,
    reset_tasks,
    scratch_store,
    unique_queue,
    utcnow,
)
from ..dispatch.dispatch import runner_pass
from ..visits.visits import fill

SIZE = 100_000
QUICK_SIZE = 10_000
EVERY_ORIGIN = VisitSettings(mixes={"git": {VisitPolicy.OLDEST_SCHEDULED_FIRST: 1}})


def send_all(store: SQLAlchemyStore, broker: CeleryBroker) -> tuple[int, float]:
    """Steps until one sends nothing: (visits sent, seconds)."""
    sent, started = 0, time.perf_counter()
    while True:
        [step] = schedule_step(store, broker, ["git"], EVERY_ORIGIN, utcnow())
        if step.skipped:
            raise RuntimeError(step.skipped)
        if not step.sent:
            return sent, time.perf_counter() - started
        sent += step.sent


def visits_rates(ctx: Context, broker_url: str, size: int) -> list[float]:
    kind = broker_kind(broker_url)
    app = celery_app(broker_url)
    queue = unique_queue("visits")
    rates = []
    with scratch_store(ctx.postgres, f"swh_bench_visits_send_{kind}") as store:
        store.create_task_type(
            TaskType(
                type="load-git",
                backend_name="loader.git",
                queue=queue,
                max_queue_length=size,
                default_interval=timedelta(days=1),
            )
        )
        lister = str(store.get_or_create_lister("bench").id)
        for attempt in range(ctx.repeat):
            raw(store, "TRUNCATE listed_origin, origin_visit_stats")
            fill(store, lister, 0, size)
            try:
                sent, seconds = send_all(store, CeleryBroker(app))
            finally:
                purge(app, queue, delete=attempt == ctx.repeat - 1)
            rates.append(sent / seconds)
            log(f"visits-send {kind} {size:,} #{attempt}: {sent:,} sent, {rates[-1]:,.0f}/s")
    return rates


def runner_rates(ctx: Context, broker_url: str, size: int) -> list[float]:
    kind = broker_kind(broker_url)
    app = celery_app(broker_url)
    queue = unique_queue("visits-runner")
    rates = []
    with scratch_store(ctx.postgres, f"swh_bench_visits_runner_{kind}") as store:
        bench_type(store, queue, max_queue_length=size)
        fill_tasks(store, size, now=utcnow())
        for attempt in range(ctx.repeat):
            if attempt:
                reset_tasks(store)
            try:
                rates.append(size / runner_pass(store, app, size))
            finally:
                purge(app, queue, delete=attempt == ctx.repeat - 1)
    return rates


def run(ctx: Context) -> None:
    size = QUICK_SIZE if ctx.quick else SIZE
    brokers = [ctx.redis] + ([ctx.amqp] if ctx.amqp else [])
    if not ctx.amqp:
        ctx.note("visits-send", skipped="rabbitmq", reason="RabbitMQ is not up")
    for broker_url in brokers:
        kind = broker_kind(broker_url)
        runner = runner_rates(ctx, broker_url, size)
        visits = visits_rates(ctx, broker_url, size)
        common: dict[str, Any] = {"broker": kind, "world": size}
        ctx.measurement(
            "visits-send",
            "schedule_recurrent",
            "visits/s",
            visits,
            ratios={"visits/runner": ratio(statistics.median(visits), statistics.median(runner))},
            digits=0,
            **common,
        )
        ctx.measurement("visits-send", "runner", "runs/s", runner, digits=0, **common)
