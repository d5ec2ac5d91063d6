"""A paused task type is not dispatched by the runner (PostgreSQL, Redis broker)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import services
import sqlalchemy as sa
from runnertest import make_test_app, new_type, ready_tasks
from waiting import delete_queues as purge

from swh_like_scheduler.broker import Message
from swh_like_scheduler.broker.port import CeleryBroker
from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import TaskStatus
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.tables import dispatch_room

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]


class SpyBroker:
    """The real broker, noting the queues whose depth is read and the
    queues published to; ``before_claims`` runs once the depths are read
    (after the pass read the task types, before it claims)."""

    def __init__(self, app: Any, before_claims: Callable[[], object] | None = None) -> None:
        self.broker = CeleryBroker(app)
        self.depth_reads: list[str] = []
        self.published: list[str] = []
        self.before_claims = before_claims

    def depths(self, queues: Sequence[str]) -> dict[str, int]:
        self.depth_reads.extend(queues)
        found = self.broker.depths(queues)
        if self.before_claims is not None:
            self.before_claims()
        return found

    def publish(self, messages: Sequence[Message]) -> int:
        self.published.extend(m.queue for m in messages)
        return self.broker.publish(messages)


class SpyIndex:
    """An index keeper that has nothing (the pass claims from the
    database) and notes the types it is asked about."""

    def __init__(self) -> None:
        self.types: set[str] = set()

    def return_stuck(self, task_type: str, *, now: datetime) -> int:
        self.types.add(task_type)
        return 0

    def sweep(self, task_type: str, **kwargs: Any) -> None:
        self.types.add(task_type)

    def claim(self, task_type: str, **kwargs: Any) -> None:
        self.types.add(task_type)


def rooms(store: SQLAlchemyStore) -> set[str]:
    with store.engine.connect() as conn:
        return set(conn.scalars(sa.select(dispatch_room.c.task_type)))


def test_a_paused_type_is_skipped_until_resumed(
    pg_store: SQLAlchemyStore, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_test_app(services.redis_url())
    now = datetime.now(tz=UTC)
    held, served = new_type(pg_store, 100), new_type(pg_store, 100)
    pg_store.create_tasks([*ready_tasks(held, 5, now), *ready_tasks(served, 3, now)], now=now)
    pg_store.pause_task_type(held.type, now=now)
    index = SpyIndex()
    try:
        with caplog.at_level(logging.INFO, logger="swh_like_scheduler.dispatch.serve"):
            for n in range(2):
                broker = SpyBroker(app)
                report = tick(pg_store, None, now + n * timedelta(seconds=1), broker=broker)
                # not due: no broker, no index, no claim, no room
                assert [t.task_type for t in report.types] == ([served.type] if n == 0 else [])
                assert held.effective_queue not in broker.depth_reads
                assert held.effective_queue not in broker.published
        assert report.next_ready is None  # the held tasks are not waited for
        said = [r.getMessage() for r in caplog.records if "is paused since" in r.getMessage()]
        assert said == [
            f"task type {held.type} is paused since {now.isoformat()}; "
            "none of its tasks is dispatched"
        ]  # once per pause
        tasks = pg_store.search_tasks(limit=100)
        assert {t.status for t in tasks if t.type == held.type} == {TaskStatus.WAITING}
        assert {t.status for t in tasks if t.type == served.type} == {TaskStatus.SCHEDULED}
        assert rooms(pg_store) == {served.type}
        tick(pg_store, None, now, broker=SpyBroker(app), index=index)  # type: ignore[arg-type]
        assert held.type not in index.types

        pg_store.resume_task_type(held.type)
        broker = SpyBroker(app)
        with caplog.at_level(logging.INFO, logger="swh_like_scheduler.dispatch.serve"):
            report = tick(pg_store, None, now, broker=broker, index=index)  # type: ignore[arg-type]
        [done] = report.types
        assert (done.task_type, done.claimed, done.published) == (held.type, 5, 5)
        assert broker.published == [held.effective_queue] * 5
        assert held.type in index.types
        assert f"task type {held.type} was resumed" in caplog.text
    finally:
        purge(app, held.effective_queue, served.effective_queue)


def test_a_pause_after_the_pass_read_the_types_still_holds(pg_store: SQLAlchemyStore) -> None:
    """The pass read the types (not paused), then the pause lands before
    its claim: the claim, which reads the pause in its own transaction,
    takes nothing, and the pass records no room for the type."""
    app = make_test_app(services.redis_url())
    now = datetime.now(tz=UTC)
    held = new_type(pg_store, 100)
    pg_store.create_tasks(list(ready_tasks(held, 4, now)), now=now)
    broker = SpyBroker(app, before_claims=lambda: pg_store.pause_task_type(held.type, now=now))
    try:
        report = tick(pg_store, None, now, broker=broker)
        [done] = report.types
        assert (done.claimed, done.published, done.error) == (0, 0, None)
        assert broker.published == []
        assert rooms(pg_store) == set()  # nothing taken because of the pause, not for want
        assert len(pg_store.list_pending(held.type, now=now)) == 4
    finally:
        purge(app, held.effective_queue)
