"""The listener's batches of raw Celery events, with its watch of workers
without task events (:class:`~swh_like_scheduler.listener.blind.BlindWatch`
on :class:`~swh_like_scheduler.listener.EventHandler`): the heartbeats'
``processed`` counts open a window in the worker's row once confirmed, and
the worker's next task event closes it (a SQLite store)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from swh_like_scheduler.domain.records import WorkerState
from swh_like_scheduler.listener import EventHandler
from swh_like_scheduler.listener.blind import BlindWatch
from swh_like_scheduler.policy.blind import blind_workers
from swh_like_scheduler.store import SQLAlchemyStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC).timestamp()
W = "plain@box"


@pytest.fixture
def store(sqlite_url: str) -> Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore.from_url(sqlite_url)
    yield store
    store.close()


@pytest.fixture
def handler(store: SQLAlchemyStore) -> EventHandler:
    handler = EventHandler(store, rng=random.Random(0))
    handler.watch = BlindWatch()
    return handler


def heartbeat(seconds: float, processed: int, *, kind: str = "worker-heartbeat") -> dict[str, Any]:
    return {
        "type": kind,
        "hostname": W,
        "timestamp": T0 + seconds,
        "freq": 2.0,
        "pid": 4242,
        "processed": processed,
        "active": 1,
    }


def started(seconds: float) -> dict[str, Any]:
    return {
        "type": "task-started",
        "uuid": f"run-{seconds}",
        "hostname": W,
        "timestamp": T0 + seconds,
    }


def row(store: SQLAlchemyStore) -> WorkerState:
    [found] = [w for w in store.get_workers() if w.hostname == W]
    return found


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, tz=UTC)


def test_heartbeats_of_a_worker_without_task_events_open_its_window(
    store: SQLAlchemyStore, handler: EventHandler
) -> None:
    handler.handle_batch([heartbeat(0, 0, kind="worker-online")])
    handler.handle_batch([heartbeat(2, 3)])  # tasks began, no task event: a sign
    assert row(store).blind_since is None
    handler.handle_batch([heartbeat(4, 5)])  # confirmed
    found = row(store)
    assert (found.blind_since, found.blind_until, found.blind_tasks) == (at(0), None, None)
    assert blind_workers(store.get_workers()) == [found]
    # a task event of it (a run the listener does not know included) closes it
    handler.handle_batch([started(5), heartbeat(6, 6)])
    found = row(store)
    assert (found.blind_since, found.blind_until) == (at(0), at(5))
    assert blind_workers(store.get_workers()) == []


def test_a_worker_that_sends_task_events_keeps_a_clean_row(
    store: SQLAlchemyStore, handler: EventHandler
) -> None:
    handler.handle_batch([heartbeat(0, 0, kind="worker-online")])
    for second in range(2, 20, 2):
        handler.handle_batch([started(second - 1), heartbeat(second, second)])
    found = row(store)
    assert (found.blind_since, found.blind_until, found.blind_tasks) == (None, None, None)


def test_without_a_watch_nothing_is_recorded(store: SQLAlchemyStore) -> None:
    handler = EventHandler(store, rng=random.Random(0))
    for second, processed in [(0, 0), (2, 3), (4, 5), (6, 9)]:
        handler.handle_batch([heartbeat(second, processed)])
    assert row(store).blind_since is None
