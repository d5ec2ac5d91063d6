"""Runs with no message a worker will get are published again, with the same
id: orphans of a runner that died between claim and publish within seconds,
published messages only when their queue cannot hold them (lost)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery
from waiting import wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.dispatch.republish import republish_unstarted
from swh_like_scheduler.dispatch.serve import tick
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
S = timedelta(seconds=1)
FIVE_MIN = timedelta(minutes=5)


@pytest.fixture
def app(broker_url: str) -> Celery:
    return make_app(config_module=None, broker_url=broker_url, load_workers=False)


@pytest.fixture
def queue(app: Celery) -> Iterator[str]:
    name = f"swh-test-republish-{uuid.uuid4().hex[:8]}"
    yield name
    with app.connection_for_write() as conn:
        conn.default_channel.queue_delete(name)


def _tasks(store: SQLAlchemyStore, queue: str, count: int, at: datetime) -> list[Task]:
    store.create_task_type(TaskType(type="t", backend_name="x.y", queue=queue))
    return store.create_tasks(
        [
            Task(
                type="t",
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=at,
                deadline=at,
            )
            for n in range(count)
        ],
        now=at,
    )


def _depth_is(app: Celery, queue: str, depth: int) -> None:
    # (RabbitMQ counts a queue's messages a moment after accepting them)
    wait_until(lambda: queue_depth(app, queue) == depth, 15, f"{depth} messages in {queue}")


def test_orphans_of_a_dead_runner_are_published_within_seconds(
    db_url: str, app: Celery, queue: str
) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    claimed_at = datetime.now(tz=UTC)
    try:
        created = _tasks(store, queue, 3, claimed_at)
        # claimed, and the runner died before publishing: no message at all
        claims = store.claim_ready_tasks("t", now=claimed_at, limit=10)
        store.cancel_tasks([created[2].id or 0], now=claimed_at)
        # not yet: a live runner may be publishing them right now
        assert republish_unstarted(store, app, claimed_at + 10 * S, older_than=None) == 0
        now = claimed_at + 31 * S
        assert republish_unstarted(store, app, now, older_than=None) == 2
        _depth_is(app, queue, 2)
        for claim in claims[:2]:
            run = store.get_task_run(claim.backend_id)
            assert run is not None and run.status is RunStatus.SCHEDULED
            assert run.scheduled == now
            assert [h["event"] for h in run.history] == ["republished"]
        # published now: not again, however long it waits (it is in its queue)
        later = now + H
        assert republish_unstarted(store, app, later, older_than=FIVE_MIN) == 0
        assert queue_depth(app, queue) == 2
    finally:
        store.close()


def test_published_messages_are_sent_again_only_when_their_queue_lost_them(
    db_url: str, app: Celery, queue: str
) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    dispatched_at = datetime.now(tz=UTC)
    try:
        _tasks(store, queue, 3, dispatched_at)
        assert tick(store, app, dispatched_at).published == 3
        _depth_is(app, queue, 3)
        # a backlog older than the delay, still in its queue: nothing is sent
        later = dispatched_at + 2 * FIVE_MIN
        assert republish_unstarted(store, app, later, older_than=FIVE_MIN) == 0
        assert republish_unstarted(store, app, later, older_than=None) == 0
        assert queue_depth(app, queue) == 3
        # the broker loses the messages: all are sent again, with their ids
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge(queue)
        assert republish_unstarted(store, app, later, older_than=FIVE_MIN) == 3
        _depth_is(app, queue, 3)
        # and not again before the delay has passed once more
        assert republish_unstarted(store, app, later + 4 * 60 * S, older_than=FIVE_MIN) == 0
    finally:
        store.close()


def test_only_what_the_queue_cannot_hold_is_sent_again_oldest_first(
    db_url: str, app: Celery, queue: str
) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    first = datetime.now(tz=UTC)
    try:
        created = _tasks(store, queue, 3, first)
        assert tick(store, app, first).published == 3
        _depth_is(app, queue, 3)
        # a worker took the two oldest messages and died without a trace;
        # the newest is still queued
        with app.connection_for_write() as conn:
            channel = conn.default_channel
            for _ in range(2):
                message = channel.basic_get(queue, no_ack=True)
                assert message is not None
        _depth_is(app, queue, 1)
        later = first + 2 * FIVE_MIN
        assert republish_unstarted(store, app, later, older_than=FIVE_MIN) == 2
        _depth_is(app, queue, 3)
        # the two oldest messages were the ones taken (first in, first out)
        resent = [bool(store.get_task_runs(t.id or 0)[0].history) for t in created]
        assert resent == [True, True, False]
    finally:
        store.close()
