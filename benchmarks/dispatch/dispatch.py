"""dispatch: one runner pass over N ready tasks, beside a plain ``apply_async``
loop over the same N messages and (Redis) the raw LPUSH ceiling."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.runner.interpreter import tune_interpreter
from swh_like_scheduler.store import SQLAlchemyStore

from ..common import (
    NOOP_TASK,
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
    task_arguments,
    unique_queue,
    utcnow,
)
from ..cpu import CpuMeter, median_parts

SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000,)
#: LPUSH commands per pipeline of the raw ceiling
PIPELINE = 1000
#: What the broker takes with no client cost: pipelined LPUSH of one stored
#: envelope (Redis), frames of one message encoded once (RabbitMQ)
RAW_CEILINGS = ("raw_lpush", "raw_amqp")


def runner_pass(store: SQLAlchemyStore, app: Any, count: int) -> float:
    """Seconds for ``tick`` (repeated) to publish ``count`` ready tasks, in a
    process tuned as ``start-runner`` tunes its own (GIL switch interval; the
    single-threaded ``apply_async`` loop is not affected by it)."""
    tune_interpreter()
    started = time.perf_counter()
    published = 0
    while published < count:
        report = tick(store, app, utcnow())
        if report.errors:
            raise RuntimeError(report.errors)
        if report.published == 0 and report.claimed == 0:
            raise RuntimeError(f"runner stalled at {published} of {count}")
        published += report.published
    return time.perf_counter() - started


def apply_async_loop(app: Any, count: int, queue: str) -> float:
    """Seconds for a plain ``apply_async`` loop (one shared producer)."""
    signature = app.signature(NOOP_TASK)
    started = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for n in range(count):
            args, kwargs = task_arguments(n)
            signature.apply_async(
                args=args, kwargs=kwargs, task_id=str(uuid.uuid4()), queue=queue, producer=producer
            )
    return time.perf_counter() - started


def raw_push(url: str, payload: bytes, count: int, key: str) -> float:
    """Seconds to LPUSH ``count`` copies of ``payload`` in pipelines."""
    client = redis.Redis.from_url(url)
    try:
        started = time.perf_counter()
        for low in range(0, count, PIPELINE):
            with client.pipeline(transaction=False) as pipe:
                for _ in range(min(PIPELINE, count - low)):
                    pipe.lpush(key, payload)
                pipe.execute()
        return time.perf_counter() - started
    finally:
        client.delete(key)
        client.close()


def raw_frames(app: Any, count: int, queue: str) -> float:
    """Seconds for RabbitMQ to take ``count`` copies of one task message
    whose frames are encoded beforehand: the broker's intake ceiling (no
    encoding cost at all on the client), written and confirmed in chunks
    as the runner writes them."""
    from swh_like_scheduler.broker import Message
    from swh_like_scheduler.broker.amqp_fast import Frames
    from swh_like_scheduler.broker.publish import MESSAGES_PER_CHECK
    from swh_like_scheduler.broker.routing import resolve_route
    from swh_like_scheduler.broker.taskmsg import TaskMessageBuilder

    args, kwargs = task_arguments(0)
    message = Message(str(uuid.uuid4()), NOOP_TASK, queue, args, kwargs)
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        route = resolve_route(app, queue)
        route.queue.declare(channel=channel)
        frames = Frames(connection, channel, TaskMessageBuilder(app), {queue: route})
        chunk = frames.encode(message) * MESSAGES_PER_CHECK
        write = connection.connection.transport.write
        started = time.perf_counter()
        for low in range(0, count, MESSAGES_PER_CHECK):
            size = min(MESSAGES_PER_CHECK, count - low)
            write(chunk if size == MESSAGES_PER_CHECK else frames.encode(message) * size)
            channel.queue_declare(queue=queue, passive=True)
        return time.perf_counter() - started


def sample_message(url: str, queue: str) -> bytes:
    client = redis.Redis.from_url(url)
    try:
        payload = client.lindex(queue, 0)
        assert payload, f"no message in {queue}"
        return bytes(payload)
    finally:
        client.close()


#: the parts of the machine's CPU a dispatch run is charged with (µs per task)
CPU_PARTS = ("process", "postgres", "redis", "rabbitmq", "softirq", "busy", "other")


def metered(timed: Callable[[], float], count: int) -> tuple[float, dict[str, float]]:
    """``timed()``'s seconds, and the CPU it cost per task in µs by part:
    ``process`` is this whole process (the runner's claiming and publishing
    threads, or the ``apply_async`` loop), the servers every process of
    theirs, ``busy`` the machine's (2 cores on the reference machine: a
    rate above ``cores / busy`` per µs cannot be had however the work is
    split)."""
    meter = CpuMeter()
    meter.start()
    seconds = timed()
    spent = meter.stop()
    spent["process"] = spent.pop("runner") + spent.pop("listener")
    per_task = meter.per(count, scale=1e6)
    return seconds, {k: round(per_task[k], 1) for k in CPU_PARTS}


def measure(
    ctx: Context, broker: str, count: int
) -> tuple[dict[str, list[float]], dict[str, list[dict[str, float]]]]:
    """Rates (per second) of the runner, apply_async and (Redis) raw LPUSH,
    ``ctx.repeat`` times each, interleaved; and the CPU per task by part
    of the runner's and ``apply_async``'s runs (:func:`metered`)."""
    kind = broker_kind(broker)
    app = celery_app(broker)
    queue = unique_queue("dispatch")
    rates: dict[str, list[float]] = {
        "runner": [],
        "apply_async": [],
        "raw_lpush": [],
        "raw_amqp": [],
    }
    cpu: dict[str, list[dict[str, float]]] = {"runner": [], "apply_async": []}
    with scratch_store(ctx.postgres, f"swh_bench_dispatch_{kind}") as store:
        bench_type(store, queue, max_queue_length=count)
        now = utcnow()
        fill_tasks(store, count, now=now, progress=count >= 1_000_000)
        for attempt in range(ctx.repeat):
            if attempt:
                reset_tasks(store)
            try:
                seconds, spent = metered(lambda: runner_pass(store, app, count), count)
                rates["runner"].append(count / seconds)
                cpu["runner"].append(spent)
                payload = sample_message(broker, queue) if kind == "redis" else b""
            finally:
                purge(app, queue, delete=False)
            try:
                seconds, spent = metered(lambda: apply_async_loop(app, count, queue), count)
                rates["apply_async"].append(count / seconds)
                cpu["apply_async"].append(spent)
            finally:
                purge(app, queue, delete=attempt == ctx.repeat - 1)  # see purge()
            if kind == "redis":
                key = f"{queue}-raw"
                rates["raw_lpush"].append(count / raw_push(broker, payload, count, key))
            else:
                try:
                    rates["raw_amqp"].append(count / raw_frames(app, count, queue))
                finally:
                    purge(app, queue, delete=attempt == ctx.repeat - 1)
            log(
                f"dispatch {kind} {count:,} #{attempt}: "
                + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items() if v)
            )
            for name, spents in cpu.items():
                log(
                    f"  CPU µs per task, {name}: "
                    + ", ".join(f"{k} {v:,.1f}" for k, v in spents[-1].items())
                )
    return {k: v for k, v in rates.items() if v}, cpu


def run(ctx: Context) -> None:
    brokers = [ctx.redis] + ([ctx.amqp] if ctx.amqp else [])
    if not ctx.amqp:
        ctx.note("dispatch", skipped="rabbitmq", reason="RabbitMQ is not up")
    for count in QUICK_SIZES if ctx.quick else SIZES:
        for broker in brokers:
            kind = broker_kind(broker)
            rates, cpu = measure(ctx, broker, count)
            runner, apply_async = rates["runner"], rates["apply_async"]
            med, base = statistics.median(runner), statistics.median(apply_async)
            ratios = {"runner/apply_async": ratio(med, base)}
            for ceiling in RAW_CEILINGS:
                if ceiling in rates:
                    raw_rates = rates[ceiling]
                    ratios[f"runner/{ceiling}"] = ratio(med, statistics.median(raw_rates))
            common = {"broker": kind, "tasks": count}
            ctx.measurement(
                "dispatch",
                "runner",
                "tasks/s",
                runner,
                ratios=ratios,
                digits=0,
                cpu_us_per_task=median_parts(cpu["runner"]),
                **common,
            )
            ctx.measurement(
                "dispatch",
                "apply_async",
                "tasks/s",
                apply_async,
                digits=0,
                cpu_us_per_task=median_parts(cpu["apply_async"]),
                **common,
            )
            for ceiling in RAW_CEILINGS:
                if ceiling in rates:
                    ctx.measurement(
                        "dispatch", ceiling, "messages/s", rates[ceiling], digits=0, **common
                    )
