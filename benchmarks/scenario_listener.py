"""listener: 20,000 outcomes (task-started + task-succeeded of 20,000
dispatched runs) applied by ``EventHandler.handle_batch`` directly
(handler-only), and published as real Celery events to the listener's durable
RabbitMQ queue then drained by a ``Listener`` (end to end, as the burst test)."""

from __future__ import annotations

import random
import statistics
import time
from datetime import timedelta
from typing import Any

from swh_like_scheduler.listener import Action, EventHandler, Listener, ListenerOptions
from swh_like_scheduler.model import Claimed
from swh_like_scheduler.store import SQLAlchemyStore

from .common import (
    Context,
    bench_type,
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

OUTCOMES = 20_000
QUICK_OUTCOMES = 5_000
#: the listener's defaults: 500 events a batch, 4 lanes on PostgreSQL
BATCH = ListenerOptions().batch_size
LANES = 4
IDLE = 0.5


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


def handler_only(store: SQLAlchemyStore, events: list[dict[str, Any]]) -> float:
    handler = EventHandler(store, rng=random.Random(0))
    started = time.perf_counter()
    applied = 0
    for low in range(0, len(events), BATCH):
        summary = handler.handle_batch(events[low : low + BATCH], lanes=LANES)
        applied += summary[Action.STARTED] + summary[Action.ENDED]
    seconds = time.perf_counter() - started
    assert applied == len(events), f"applied {applied} of {len(events)}"
    return seconds


def end_to_end(store: SQLAlchemyStore, app: Any, events: list[dict[str, Any]]) -> float:
    queue = unique_queue("listener")
    options = ListenerOptions(
        queue_name=queue, idle_timeout=IDLE, wakeup_workers=False, retry_delay=0.5
    )
    try:
        Listener(app, store, rng=random.Random(0), options=options).run(once=True)  # declare
        with app.connection_for_write() as conn:
            dispatcher = app.events.Dispatcher(conn)
            for event in events:
                fields = {
                    k: v for k, v in event.items() if k not in ("type", "hostname", "pid", "clock")
                }
                dispatcher.send(event["type"], **fields)
            dispatcher.close()
        listener = Listener(app, store, rng=random.Random(0), options=options)
        started = time.perf_counter()
        stats = listener.run(once=True)
        seconds = time.perf_counter() - started - IDLE
    finally:
        purge(app, queue)
    applied = stats.applied[Action.STARTED] + stats.applied[Action.ENDED]
    assert applied == len(events), f"applied {applied} of {len(events)}"
    return seconds


def run(ctx: Context) -> None:
    count = QUICK_OUTCOMES if ctx.quick else OUTCOMES
    app = celery_app(ctx.amqp) if ctx.amqp else None
    if app is None:
        ctx.note("listener", skipped="end_to_end", reason="RabbitMQ is not up")
    rates: dict[str, list[float]] = {"handler_only": [], "end_to_end": []}
    with scratch_store(ctx.postgres, "swh_bench_listener") as store:
        bench_type(store, unique_queue("listener"), max_queue_length=None)
        fill_tasks(store, count, now=utcnow())
        shift = 0
        for attempt in range(ctx.repeat):
            for name in ("handler_only", "end_to_end") if app else ("handler_only",):
                shift += 1
                reset_tasks(store, due_at=utcnow() - timedelta(seconds=shift))
                events = raw_events(claim_all(store, count), utcnow().timestamp())
                if name == "handler_only":
                    seconds = handler_only(store, events)
                else:
                    seconds = end_to_end(store, app, events)
                rates[name].append(len(events) / seconds)
                left = raw(store, "SELECT count(*) FROM task_run WHERE status <> 'eventful'")
                assert left[0][0] == 0, f"{left[0][0]} runs not recorded"
            log(
                f"listener #{attempt}: "
                + ", ".join(f"{k} {v[-1]:,.0f} events/s" for k, v in rates.items() if v)
            )
    handler = rates["handler_only"]
    ratios = {}
    if rates["end_to_end"]:
        e2e = rates["end_to_end"]
        ratios = {
            "end_to_end/handler_only": ratio(statistics.median(e2e), statistics.median(handler))
        }
    params = {"outcomes": count, "batch": BATCH, "lanes": LANES}
    ctx.measurement("listener", "handler_only", "events/s", handler, digits=0, **params)
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
