"""peers: the same N due entries in stock Celery beat (``celery.beat.Scheduler``,
a ``beat_schedule`` of N entries) and in RedBeat (``RedBeatScheduler``), each
driven in-process until all N messages are on the Redis broker, beside our
runner pass over N ready tasks (same broker, same task, same arguments)."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import redis
from celery.beat import Scheduler

from ..common import (
    NOOP_TASK,
    Context,
    bench_type,
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
from ..dispatch.dispatch import runner_pass

SIZES = (1_000, 10_000)
QUICK_SIZES = (1_000,)
#: a peer that has not sent everything after this long is stopped (and reported)
TIMEOUT = 900.0
QUICK_TIMEOUT = 120.0
INTERVAL = timedelta(hours=1)


def counting(base: type) -> type:
    """``base`` counting the messages it sends."""

    class Counting(base):  # type: ignore[misc, valid-type]
        sent = 0

        def apply_async(self, *args: Any, **kwargs: Any) -> Any:
            result = super().apply_async(*args, **kwargs)
            type(self).sent += 1
            return result

    return Counting


def drive(scheduler: Any, count: int, timeout: float) -> tuple[float, int]:
    """Tick until ``count`` messages were sent: (seconds, sent)."""
    started = time.perf_counter()
    while type(scheduler).sent < count and time.perf_counter() - started < timeout:
        scheduler.tick()
    return time.perf_counter() - started, type(scheduler).sent


def llen(url: str, queue: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.llen(queue))
    finally:
        client.close()


def celery_beat(ctx: Context, count: int, timeout: float) -> tuple[float, int]:
    queue = unique_queue("beat")
    app = celery_app(ctx.redis)
    due = utcnow() - 2 * INTERVAL
    schedule = {}
    for n in range(count):
        args, kwargs = task_arguments(n)
        schedule[f"bench-{n}"] = {
            "task": NOOP_TASK,
            "schedule": INTERVAL,
            "args": args,
            "kwargs": kwargs,
            "options": {"queue": queue},
            "last_run_at": due,
        }
    app.conf.beat_schedule = schedule
    try:
        scheduler = counting(Scheduler)(app=app, lazy=False)
        result = drive(scheduler, count, timeout)
        assert result[1] < count or llen(ctx.redis, queue) == count
        return result
    finally:
        purge(app, queue)


def redbeat(ctx: Context, count: int, timeout: float) -> tuple[float, int]:
    from redbeat.schedulers import (
        RedBeatScheduler,
        RedBeatSchedulerEntry,
        acquire_distributed_beat_lock,
    )

    queue = unique_queue("redbeat")
    prefix = f"{queue}:"
    app = celery_app(ctx.redis, redbeat_redis_url=ctx.redis, redbeat_key_prefix=prefix)
    client = redis.Redis.from_url(ctx.redis)
    try:
        due = utcnow() - 2 * INTERVAL
        for n in range(count):
            args, kwargs = task_arguments(n)
            RedBeatSchedulerEntry(
                f"bench-{n}",
                NOOP_TASK,
                INTERVAL,
                args=args,
                kwargs=kwargs,
                options={"queue": queue},
                app=app,
                last_run_at=due,
            ).save()
        scheduler = counting(RedBeatScheduler)(app=app, lazy=False)
        acquire_distributed_beat_lock(sender=SimpleNamespace(scheduler=scheduler))
        try:
            result = drive(scheduler, count, timeout)
        finally:
            scheduler.close()
        assert result[1] < count or llen(ctx.redis, queue) == count
        return result
    finally:
        purge(app, queue)
        keys = list(client.scan_iter(match=f"{prefix}*", count=10_000))
        for low in range(0, len(keys), 10_000):
            client.delete(*keys[low : low + 10_000])
        client.close()


def ours(ctx: Context, count: int) -> float:
    app = celery_app(ctx.redis)
    queue = unique_queue("peers")
    with scratch_store(ctx.postgres, "swh_bench_peers") as store:
        bench_type(store, queue, max_queue_length=count)
        fill_tasks(store, count, now=utcnow())
        reset_tasks(store)
        try:
            return runner_pass(store, app, count)
        finally:
            purge(app, queue)


def run(ctx: Context) -> None:
    timeout = QUICK_TIMEOUT if ctx.quick else TIMEOUT
    for count in QUICK_SIZES if ctx.quick else SIZES:
        seconds: dict[str, list[float]] = {"ours": [], "celery_beat": [], "redbeat": []}
        incomplete: dict[str, int] = {}
        for attempt in range(ctx.repeat):
            seconds["ours"].append(ours(ctx, count))
            for name, peer in (("celery_beat", celery_beat), ("redbeat", redbeat)):
                if name in incomplete:
                    continue  # it timed out once: not again
                took, sent = peer(ctx, count, timeout)
                if sent < count:
                    incomplete[name] = sent
                    ctx.note(
                        "peers",
                        peer=name,
                        tasks=count,
                        timed_out_after_s=round(took, 1),
                        sent=sent,
                    )
                else:
                    seconds[name].append(took)
            log(
                f"peers {count:,} #{attempt}: "
                + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in seconds.items() if v)
            )
        mine = statistics.median(seconds["ours"])
        ratios = {
            f"{name}_s/ours_s": ratio(statistics.median(seconds[name]), mine)
            for name in ("celery_beat", "redbeat")
            if seconds[name]
        }
        ctx.measurement("peers", "ours", "s", seconds["ours"], ratios=ratios, tasks=count)
        for name in ("celery_beat", "redbeat"):
            if seconds[name]:
                ctx.measurement("peers", name, "s", seconds[name], tasks=count)
