"""``schedule-recurrent`` on PostgreSQL and a real broker (Redis, RabbitMQ):
the queue of a visit type filled up to its limit and no further, what was
sent marked scheduled (counted from the messages in the broker), a broker
that refuses leaves nothing marked, and schedulers at once (threads, then
real processes) never send an origin twice."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import amqp.exceptions
import pytest
from celery import Celery

from swh_like_scheduler.broker import BrokerError
from swh_like_scheduler.broker.port import CeleryBroker
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.recurrent.scheduler import STEP_LIMIT, schedule_step, schedule_type
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import ListedOrigin
from swh_like_scheduler.visits.policy import VisitPolicy, VisitSettings

pytestmark = pytest.mark.postgresql
UNDATED = VisitSettings(mixes={"git": {VisitPolicy.OLDEST_SCHEDULED_FIRST: 1}})


@pytest.fixture
def app(broker_url: str) -> Celery:
    return make_app(config_module=None, broker_url=broker_url, load_workers=False)


@pytest.fixture
def queue(app: Celery) -> Iterator[str]:
    name = f"swh-visits-test-{uuid.uuid4().hex[:10]}"
    yield name
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        if conn.transport.driver_type == "redis":
            channel.client.delete(name, f"_kombu.binding.{name}")
            return
        with contextlib.suppress(Exception):
            channel.queue_delete(name)


def setup(store: SQLAlchemyStore, queue: str, origins: int, limit: int | None) -> list[str]:
    store.create_task_type(
        TaskType(type="load-git", backend_name="loader.git", queue=queue, max_queue_length=limit)
    )
    lister = str(store.get_or_create_lister("gitlab").id)
    urls = [f"https://forge.example/p{n:04d}" for n in range(origins)]
    store.record_listed_origins(
        [
            ListedOrigin(lister, u, "git", extra_loader_arguments={"n": i})
            for i, u in enumerate(urls)
        ]
    )
    return urls


def drain(app: Celery, queue: str) -> list[dict[str, Any]]:
    """The visits waiting in ``queue`` (taken off it): each one's kwargs and id."""
    found = []
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        while True:
            try:
                message = channel.basic_get(queue, no_ack=True)
            except amqp.exceptions.NotFound:  # RabbitMQ: nothing was ever sent
                return found
            if message is None:
                return found
            args, kwargs, _ = json.loads(message.body)
            assert args == []
            found.append({**kwargs, "id": message.headers["id"]})


def test_a_room_larger_than_a_step_is_filled_by_the_steps_that_follow(
    pg_store: SQLAlchemyStore, app: Celery, queue: str
) -> None:
    """A queue limit of 50,000 (a policy's share over the 10,000 a grab may
    take): the first step sends 10,000 and says it was full, the next the
    rest; each origin once."""
    urls = setup(pg_store, queue, STEP_LIMIT + 1500, 50_000)
    broker = CeleryBroker(app)
    now = datetime.now(UTC)
    first = schedule_step(pg_store, broker, ["git"], VisitSettings(), now)[0]
    assert (first.room, first.sent, first.full, first.skipped) == (
        STEP_LIMIT,
        STEP_LIMIT,
        True,
        None,
    )
    second = schedule_type(pg_store, broker, "git", VisitSettings(), now)
    assert (second.sent, second.full) == (1500, False)
    sent = drain(app, queue)
    assert sorted(v["url"] for v in sent) == sorted(urls)


def test_the_queue_is_filled_to_its_limit_and_what_was_sent_is_marked(
    pg_store: SQLAlchemyStore, app: Celery, queue: str
) -> None:
    urls = setup(pg_store, queue, 50, 20)
    broker = CeleryBroker(app)
    now = datetime.now(UTC)
    first = schedule_type(pg_store, broker, "git", UNDATED, now)
    assert (first.waiting, first.room, first.sent) == (0, 20, 20)
    full = schedule_type(pg_store, broker, "git", UNDATED, now)
    assert (full.waiting, full.room, full.sent) == (20, 0, 0)  # nothing over the limit
    sent = drain(app, queue)
    assert len(sent) == 20 and len({v["id"] for v in sent}) == 20
    assert [v["url"] for v in sent] == urls[:20]  # the policy's order: by url here
    assert all(v["n"] == urls.index(v["url"]) for v in sent)  # the loader's arguments
    stats = pg_store.origin_visit_stats_get([(u, "git") for u in urls])
    assert sorted(s.url for s in stats if s.last_scheduled == now) == urls[:20]
    later = schedule_type(pg_store, broker, "git", UNDATED, now + timedelta(minutes=1))
    assert later.sent == 20
    again = drain(app, queue)
    assert [v["url"] for v in again] == urls[20:40]  # the first 20 are cooling down


@pytest.mark.rabbitmq
def test_a_broker_that_refuses_the_messages_leaves_nothing_marked(
    pg_store: SQLAlchemyStore,
) -> None:
    """The queue exists on RabbitMQ with other arguments than Celery
    declares it with: its depth can be read, the publish is refused."""
    import services

    app = make_app(config_module=None, broker_url=services.amqp_url(), load_workers=False)
    queue = f"swh-visits-test-{uuid.uuid4().hex[:10]}"
    urls = setup(pg_store, queue, 5, None)
    with app.connection_for_write() as conn:
        conn.default_channel.queue_declare(queue, durable=False, auto_delete=False)
    try:
        with pytest.raises(BrokerError):
            schedule_type(pg_store, CeleryBroker(app), "git", UNDATED, datetime.now(UTC))
        stats = pg_store.origin_visit_stats_get([(u, "git") for u in urls])
        assert [s.last_scheduled for s in stats] == []  # not even a row
        now = datetime.now(UTC)
        report = schedule_step(pg_store, CeleryBroker(app), ["git"], UNDATED, now)
        assert report[0].failed and "PRECONDITION" in str(report[0].skipped).upper()
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)


def test_schedulers_at_once_never_send_an_origin_twice(
    postgres_url: str, app: Celery, queue: str
) -> None:
    """Six threads, each with its own store (its own connections), step
    again and again over 300 origins: every origin is sent exactly once."""
    first = SQLAlchemyStore.from_url(postgres_url)
    try:
        urls = setup(first, queue, 300, 25)
    finally:
        first.close()
    now = datetime.now(UTC)

    def scheduler(_: int) -> int:
        store = SQLAlchemyStore.from_url(postgres_url)
        try:
            return sum(
                schedule_type(store, CeleryBroker(app), "git", UNDATED, now).sent for _ in range(8)
            )
        finally:
            store.close()

    sent: list[dict[str, Any]] = []
    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(scheduler, n) for n in range(6)]
        while not all(f.done() for f in futures):  # a worker: take what is queued
            sent.extend(drain(app, queue))
        counted = sum(f.result() for f in futures)
    sent.extend(drain(app, queue))
    assert counted == len(sent) == 300
    assert sorted(v["url"] for v in sent) == urls


def test_real_processes_at_once_never_send_an_origin_twice(
    postgres_url: str, broker_url: str, app: Celery, queue: str
) -> None:
    store = SQLAlchemyStore.from_url(postgres_url)
    try:
        urls = setup(store, queue, 400, None)  # each step may take all of them
    finally:
        store.close()
    command = [
        str(Path(sys.executable).parent / "swh"),
        "scheduler",
        "--db-url",
        postgres_url,
        "schedule-recurrent",
        "--once",
        "--json",
        "--broker-url",
        broker_url,
    ]
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)
    ]
    reports = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
        reports.append(json.loads(out))
    sent = drain(app, queue)
    assert sum(r[0]["sent"] for r in reports) == len(sent) == 400
    assert sorted(v["url"] for v in sent) == urls
