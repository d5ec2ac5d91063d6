"""Hostile and malformed events never stop the listener: each bad event is
dropped alone (logged at most once a while) and the good ones around it are
recorded. On SQLite (the handler) and through Celery's receiver (the
consumer's edge, where Celery's Lamport clock reads the event)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kombu import Connection
from listenertest import make_test_app

from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.listener import EventHandler, ListenerOptions, poison
from swh_like_scheduler.listener.consumer import ListenerReceiver
from swh_like_scheduler.store import SQLAlchemyStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)

#: the hand-made messages of the fault run that killed the listener, and more
HOSTILE: list[Any] = [
    {"type": "task-succeeded", "uuid": "x", "timestamp": 1e20, "result": "None"},
    {"type": "task-succeeded", "uuid": "x", "timestamp": 1e9, "runtime": 1e12},
    {"type": "task-started", "uuid": "x", "timestamp": 1e9, "clock": "abc"},
    {"type": "worker-heartbeat", "hostname": "w@n", "timestamp": 1e300, "freq": 2.0},
    {"type": "worker-heartbeat", "hostname": "w@n", "timestamp": float("nan")},
    {"type": "worker-online", "hostname": "w@n", "timestamp": 1e9, "pid": "12", "freq": -1},
    {"type": "task-failed", "uuid": "u" * 100_000, "timestamp": 1e9},
    {"type": "task-result", "uuid": "x", "timestamp": -5.0, "result": {"status": 7}},
    {"type": "task-succeeded", "uuid": ["x"], "timestamp": "now"},
    {"type": 3, "uuid": "x"},
    {"type": "task-revoked", "uuid": "x", "timestamp": float("inf")},
    {"type": "task-result", "uuid": "x", "timestamp": 1e9, "result": {"status": "bogus"}},
]

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
event_types = st.sampled_from(
    [
        "task-started",
        "task-succeeded",
        "task-result",
        "task-failed",
        "task-revoked",
        "task-rejected",
        "task-retried",
        "worker-heartbeat",
        "worker-online",
        "worker-offline",
        "anything",
    ]
)
hostile_events = st.fixed_dictionaries(
    {"type": event_types},
    optional={
        "uuid": json_values,
        "timestamp": json_values,
        "runtime": json_values,
        "hostname": json_values,
        "result": json_values,
        "exception": json_values,
        "freq": json_values,
        "pid": json_values,
        "clock": json_values,
        "requeue": json_values,
    },
)


def dispatched(store: SQLAlchemyStore) -> str:
    if store.get_task_type("p") is None:
        store.create_task_type(TaskType(type="p", backend_name="p", default_interval=H))
    [task] = store.create_tasks(
        [
            Task(
                type="p",
                kwargs={"n": random.random()},
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=T0 - H,
                deadline=T0,
            )
        ],
        now=T0 - H,
    )
    return store.schedule_task_run(task.id or 0, now=T0).backend_id


def good_end(backend_id: str) -> dict[str, Any]:
    return {
        "type": "task-succeeded",
        "uuid": backend_id,
        "timestamp": (T0 + H).timestamp(),
        "hostname": "w1@node",
        "runtime": 2.0,
        "result": "{'status': 'eventful'}",
    }


def test_the_hand_made_poison_is_dropped_and_the_good_event_recorded(
    sqlite_url: str,
) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    backend_id = dispatched(store)
    before = poison.dropped_total()
    summary = EventHandler(store, rng=random.Random(0)).handle_batch(
        [*HOSTILE, good_end(backend_id), "not even a mapping"]  # type: ignore[list-item]
    )
    assert summary.total == len(HOSTILE) + 2
    run = store.get_task_run(backend_id)
    assert run is not None and run.status is RunStatus.EVENTFUL
    assert poison.dropped_total() > before  # the non-mapping at least
    store.close()


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(events=st.lists(hostile_events, max_size=6), at=st.integers(0, 6))
def test_random_events_never_stop_the_handler(
    sqlite_url: str, events: list[dict[str, Any]], at: int
) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    try:
        backend_id = dispatched(store)
        batch = [*events]
        batch.insert(min(at, len(batch)), good_end(backend_id))
        EventHandler(store, rng=random.Random(0)).handle_batch(batch)
        run = store.get_task_run(backend_id)
        assert run is not None and run.status is RunStatus.EVENTFUL
    finally:
        store.close()


@pytest.mark.redis
def test_the_receiver_hands_on_every_event_and_drops_what_is_not_one(redis_broker: str) -> None:
    """The receiver does not run Celery's event machinery (its Lamport clock
    would raise a TypeError for a ``clock`` of ``"abc"``): a field the
    listener does not read cannot lose an event; what is not an event is
    dropped."""
    app = make_test_app(redis_broker)
    received: list[list[Any]] = []
    with Connection(redis_broker) as connection:
        receiver = ListenerReceiver(
            connection,
            app=app,
            options=ListenerOptions(queue_name="celeryev.swh-test-poison"),
            on_events=lambda events, message: received.append(events),
        )
        good = {"type": "task-started", "uuid": "a", "timestamp": 1e9, "clock": 3}
        bad = {"type": "task-started", "uuid": "b", "timestamp": 1e9, "clock": "abc"}
        receiver._on_message([bad, good, 42], message=None)
    [events] = received
    assert [e["uuid"] for e in events] == ["b", "a"]


@pytest.fixture
def redis_broker() -> str:
    import services

    return str(services.require("redis", services.redis_url))


def test_a_listener_fed_poison_on_the_events_exchange_keeps_recording(
    pg_store: SQLAlchemyStore, broker_url: str
) -> None:
    """The hand-made messages published on ``celeryev`` as any broker client
    can, around a real outcome: the listener keeps running and records it."""
    from celery.events.event import get_exchange
    from listenertest import listener_thread, options, unique_queue_name
    from waiting import delete_queues, wait_until

    from swh_like_scheduler.listener import Listener
    from swh_like_scheduler.listener.consumer import ALL_EVENTS

    app = make_test_app(broker_url)
    backend_id = dispatched(pg_store)
    queue_name = unique_queue_name()
    # bound to every event: the hostile types and keys reach the listener too
    listener_options = options(queue_name, routing_keys=ALL_EVENTS)
    listener = Listener(app, pg_store, rng=random.Random(0), options=listener_options)
    try:
        with listener_thread(listener) as running:
            with app.connection_for_write() as conn:
                exchange = get_exchange(conn, name="celeryev")  # fanout on Redis
                producer = conn.Producer(exchange=exchange, serializer="json")
                for event in [*HOSTILE, good_end(backend_id), *HOSTILE]:
                    kind = event.get("type")
                    key = kind.replace("-", ".") if isinstance(kind, str) else "task.x"
                    producer.publish(event, routing_key=key, exchange=exchange)
            wait_until(
                lambda: not pg_store.get_task_run(backend_id).status.is_open,  # type: ignore[union-attr]
                30,
                "the good event to be recorded",
            )
            assert running.thread.is_alive() and not running.errors
    finally:
        delete_queues(app, queue_name)
    run = pg_store.get_task_run(backend_id)
    assert run is not None and run.status is RunStatus.EVENTFUL
