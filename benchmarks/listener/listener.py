"""listener: 20,000 outcomes (task-started + task-succeeded of 20,000
dispatched runs) applied by ``EventHandler.handle_batch`` directly
(handler-only), and published as real Celery events to the listener's durable
RabbitMQ queue then drained by a ``Listener`` (end to end, as the burst test).

On Redis events are a PUBLISH fan-out: nothing waits in a queue for a
listener, so ``end_to_end_redis`` is a listener subscribed first while
another process publishes the events (timed from the first publish to the
last event applied: the rate of the slower of the two). ``shared_queue``:
1, 2 and 3 listener *processes* draining the same pre-filled RabbitMQ queue
(processes, not threads: the GIL), with their rates against one listener."""

from __future__ import annotations

import multiprocessing
import random
import statistics
import threading
import time
from datetime import timedelta
from typing import Any

from swh_like_scheduler.domain.model import Claimed
from swh_like_scheduler.listener import Action, EventHandler, Listener, ListenerOptions
from swh_like_scheduler.store import SQLAlchemyStore

from ..common import (
    Context,
    bench_type,
    celery_app,
    database_url,
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
from ..cpu import CpuMeter, median_parts

OUTCOMES = 20_000
QUICK_OUTCOMES = 5_000
#: the listener's defaults: 500 events a batch, 4 lanes on PostgreSQL
BATCH = ListenerOptions().batch_size
LANES = 4
IDLE = 0.5
#: listener processes sharing one queue
SHARED = (1, 2, 3)
#: processes publishing to Redis (one Celery dispatcher alone is slower than the listener)
PUBLISHERS = 2
DATABASE = "swh_bench_listener"


def claim_all(store: SQLAlchemyStore, count: int) -> list[Claimed]:
    claimed: list[Claimed] = []
    while len(claimed) < count:
        batch = store.claim_ready_tasks(
            "bench", now=utcnow(), limit=min(5000, count - len(claimed))
        )
        assert batch, f"only {len(claimed)} of {count} claimed"
        claimed.extend(batch)
    return claimed


def raw_events(claimed: list[Claimed], at: float) -> list[dict[str, Any]]:
    """The events a worker sends for each run, as the receiver hands them on."""
    events: list[dict[str, Any]] = []
    for c in claimed:
        common = {"uuid": c.backend_id, "hostname": "bench@host", "pid": 1, "clock": 1}
        events.append({"type": "task-started", "timestamp": at, **common})
        events.append(
            {
                "type": "task-succeeded",
                "timestamp": at + 0.5,
                "runtime": 0.5,
                "result": "{'status': 'eventful'}",
                **common,
            }
        )
    return events


def handler_only(
    store: SQLAlchemyStore, events: list[dict[str, Any]]
) -> tuple[float, float, dict[str, float]]:
    """Seconds to apply ``events``, this process's CPU per event (µs): the
    handler and its lanes are all this process does meanwhile, and its CPU
    moves far less than its rate when the machine's speed does; and the
    machine's CPU per event by part (µs: PostgreSQL's server, the
    machine's busy time)."""
    handler = EventHandler(store, rng=random.Random(0))
    meter = CpuMeter()
    meter.start()
    started = time.perf_counter()
    cpu = time.process_time()
    applied = 0
    for low in range(0, len(events), BATCH):
        summary = handler.handle_batch(events[low : low + BATCH], lanes=LANES)
        applied += summary[Action.STARTED] + summary[Action.ENDED]
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    meter.stop()
    handler.close()
    assert applied == len(events), f"applied {applied} of {len(events)}"
    per_event = meter.per(len(events), scale=1e6)
    parts = {k: round(per_event[k], 1) for k in ("postgres", "softirq", "busy")}
    return seconds, cpu * 1e6 / len(events), parts


def _options(queue: str) -> ListenerOptions:
    return ListenerOptions(
        queue_name=queue, idle_timeout=IDLE, wakeup_workers=False, retry_delay=0.5
    )


def publish(app: Any, events: list[dict[str, Any]]) -> None:
    """Send ``events`` as a worker does (one message each)."""
    with app.connection_for_write() as conn:
        dispatcher = app.events.Dispatcher(conn)
        for event in events:
            fields = {
                k: v for k, v in event.items() if k not in ("type", "hostname", "pid", "clock")
            }
            dispatcher.send(event["type"], **fields)
        dispatcher.close()


def end_to_end(store: SQLAlchemyStore, app: Any, events: list[dict[str, Any]]) -> float:
    queue = unique_queue("listener")
    options = _options(queue)
    try:
        Listener(app, store, rng=random.Random(0), options=options).run(once=True)  # declare
        publish(app, events)
        listener = Listener(app, store, rng=random.Random(0), options=options)
        started = time.perf_counter()
        stats = listener.run(once=True)
        seconds = time.perf_counter() - started - IDLE
    finally:
        purge(app, queue)
    applied = stats.applied[Action.STARTED] + stats.applied[Action.ENDED]
    assert applied == len(events), f"applied {applied} of {len(events)}"
    return seconds


def _publisher(broker: str, events: list[dict[str, Any]], ready: Any, go: Any) -> None:
    """(another process) publish ``events`` once told to."""
    app = celery_app(broker)
    ready.put(True)
    go.wait()
    started = time.perf_counter()
    publish(app, events)
    ready.put(time.perf_counter() - started)


def end_to_end_redis(
    store: SQLAlchemyStore, broker: str, events: list[dict[str, Any]]
) -> tuple[float, float]:
    """Events published by other processes (:data:`PUBLISHERS`, each a part)
    to a subscribed listener: the seconds until the last was applied, and the
    seconds publishing took (the publishers alone may be the bound)."""
    spawn = multiprocessing.get_context("spawn")
    ready, go = spawn.Queue(), spawn.Event()
    # contiguous parts: a run's start and end go through one publisher, in order
    part = -(-len(events) // (2 * PUBLISHERS)) * 2
    publishers = [
        spawn.Process(target=_publisher, args=(broker, events[low : low + part], ready, go))
        for low in range(0, len(events), part)
    ]
    for publisher in publishers:
        publisher.start()
    listener = Listener(
        celery_app(broker), store, rng=random.Random(0), options=_options(unique_queue("l"))
    )
    listener.handler.task_types.prime()
    thread = threading.Thread(target=listener.run, name="bench-listener")
    thread.start()
    try:
        for _ in publishers:
            ready.get(timeout=60)
        assert listener.ready.wait(30), "the listener did not subscribe"
        started = time.perf_counter()
        go.set()
        deadline = started + 120
        while _applied(listener.stats.applied) < len(events) and time.perf_counter() < deadline:
            time.sleep(0.005)
        seconds = time.perf_counter() - started
        publishing = max(float(ready.get(timeout=60)) for _ in publishers)
    finally:
        listener.stop.set()
        thread.join(30)
        for publisher in publishers:
            publisher.join(30)
    applied = _applied(listener.stats.applied)
    assert applied == len(events), f"applied {applied} of {len(events)} (Redis dropped some?)"
    return seconds, publishing


def _applied(summary: Any) -> int:
    return int(summary[Action.STARTED] + summary[Action.ENDED])


def _shared_listener(url: str, broker: str, queue: str, ready: Any, go: Any, out: Any) -> None:
    """(one of several processes) drain ``queue`` once told to; put how many
    events it applied and when it was done (wall clock)."""
    store = SQLAlchemyStore.from_url(url)
    try:
        listener = Listener(
            celery_app(broker), store, rng=random.Random(0), options=_options(queue)
        )
        listener.handler.task_types.prime()
        ready.put(True)
        go.wait()
        stats = listener.run(once=True)
        applied = stats.applied
        # a run's end read by another listener before this one wrote its
        # start records the start it implies: the start is then a duplicate
        out.put(
            (
                applied[Action.ENDED],
                _applied(applied) + applied[Action.DUPLICATE],
                time.time() - IDLE,
            )
        )
    finally:
        store.close()


def shared_queue(
    store: SQLAlchemyStore, url: str, app: Any, broker: str, events: list[dict[str, Any]], n: int
) -> float:
    """Seconds for ``n`` listener processes to drain ``events`` from one queue."""
    queue = unique_queue("listener")
    spawn = multiprocessing.get_context("spawn")
    ready, go, out = spawn.Queue(), spawn.Event(), spawn.Queue()
    try:
        Listener(app, store, rng=random.Random(0), options=_options(queue)).run(once=True)
        publish(app, events)
        procs = [
            spawn.Process(target=_shared_listener, args=(url, broker, queue, ready, go, out))
            for _ in range(n)
        ]
        for proc in procs:
            proc.start()
        for _ in procs:
            ready.get(timeout=60)
        started = time.time()
        go.set()
        done = [out.get(timeout=180) for _ in procs]
        for proc in procs:
            proc.join(30)
    finally:
        purge(app, queue)
    ended = sum(e for e, _, _ in done)
    assert ended == len(events) // 2, f"ended {ended} of {len(events) // 2}"
    applied = sum(a for _, a, _ in done)
    assert applied == len(events), f"applied {applied} of {len(events)}"
    return max(end for _, _, end in done) - started


def run(ctx: Context) -> None:
    count = QUICK_OUTCOMES if ctx.quick else OUTCOMES
    app = celery_app(ctx.amqp) if ctx.amqp else None
    if app is None:
        ctx.note("listener", skipped="end_to_end", reason="RabbitMQ is not up")
    rates: dict[str, list[float]] = {"handler_only": [], "end_to_end": [], "end_to_end_redis": []}
    rates.update({f"shared_{n}": [] for n in SHARED})
    published: list[float] = []  # events/s of the Redis publishers alone
    cpu_per_event: list[float] = []  # µs of this process's CPU, handler only
    machine_per_event: list[dict[str, float]] = []  # µs by part, handler only
    names = ["handler_only", "end_to_end_redis"]
    if app is not None:
        names[1:1] = ["end_to_end"]
        names += [f"shared_{n}" for n in SHARED]
    with scratch_store(ctx.postgres, DATABASE) as store:
        url = database_url(ctx.postgres, DATABASE)
        bench_type(store, unique_queue("listener"), max_queue_length=None)
        fill_tasks(store, count, now=utcnow())
        shift = 0
        for attempt in range(ctx.repeat):
            for name in names:
                shift += 1
                reset_tasks(store, due_at=utcnow() - timedelta(seconds=shift))
                events = raw_events(claim_all(store, count), utcnow().timestamp())
                if name == "handler_only":
                    seconds, per_event, parts = handler_only(store, events)
                    cpu_per_event.append(per_event)
                    machine_per_event.append(parts)
                elif name == "end_to_end":
                    seconds = end_to_end(store, app, events)
                elif name == "end_to_end_redis":
                    seconds, publishing = end_to_end_redis(store, ctx.redis, events)
                    published.append(len(events) / publishing)
                else:
                    assert ctx.amqp is not None
                    n = int(name.split("_")[1])
                    seconds = shared_queue(store, url, app, ctx.amqp, events, n)
                rates[name].append(len(events) / seconds)
                left = raw(store, "SELECT count(*) FROM task_run WHERE status <> 'eventful'")
                assert left[0][0] == 0, f"{left[0][0]} runs not recorded"
            log(
                f"listener #{attempt}: "
                + ", ".join(f"{k} {v[-1]:,.0f} events/s" for k, v in rates.items() if v)
            )
    handler = rates["handler_only"]
    median = statistics.median
    ratios = {}
    if rates["end_to_end"]:
        e2e = rates["end_to_end"]
        ratios = {
            "end_to_end/handler_only": ratio(statistics.median(e2e), statistics.median(handler))
        }
    params = {"outcomes": count, "batch": BATCH, "lanes": LANES}
    ctx.measurement(
        "listener",
        "handler_only",
        "events/s",
        handler,
        digits=0,
        **params,
        cpu_us_per_event=round(statistics.median(cpu_per_event), 1),
        machine_us_per_event=median_parts(machine_per_event),
    )
    if rates["end_to_end"]:
        ctx.measurement(
            "listener",
            "end_to_end",
            "events/s",
            rates["end_to_end"],
            ratios=ratios,
            digits=0,
            broker="rabbitmq",
            **params,
        )
    redis = rates["end_to_end_redis"]
    ctx.measurement(
        "listener",
        "end_to_end_redis",
        "events/s",
        redis,
        ratios={"end_to_end_redis/handler_only": ratio(median(redis), median(handler))},
        digits=0,
        broker="redis",
        **params,
        publisher_events_per_s=float(round(median(published))),
    )
    if rates["shared_1"]:
        one = median(rates["shared_1"])
        for n in SHARED:
            ctx.measurement(
                "listener",
                f"shared_queue_{n}",
                "events/s",
                rates[f"shared_{n}"],
                ratios={f"{n}_listeners/1": ratio(median(rates[f"shared_{n}"]), one)},
                digits=0,
                broker="rabbitmq",
                listeners=n,
                **params,
            )
