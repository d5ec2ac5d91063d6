"""Runs a live worker without task events may have taken are not published
again (:func:`~swh_like_scheduler.dispatch.republish.republish_unstarted`
with the workers' windows): their messages left the queue for that worker,
which may run them; a second message would run the body twice. Once the
worker is gone they are published again as lost."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery
from waiting import wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.dispatch import republish
from swh_like_scheduler.dispatch.republish import republish_unstarted
from swh_like_scheduler.dispatch.serve import tick
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.domain.records import BlindWindow, WorkerSighting
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.plumbing.quietlog import QuietLog
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
S = timedelta(seconds=1)
FIVE_MIN = timedelta(minutes=5)
BLIND = "plain@box"


@pytest.fixture
def app(broker_url: str) -> Celery:
    return make_app(config_module=None, broker_url=broker_url, load_workers=False)


@pytest.fixture
def queue(app: Celery) -> Iterator[str]:
    name = f"swh-test-held-{uuid.uuid4().hex[:8]}"
    yield name
    with app.connection_for_write() as conn:
        conn.default_channel.queue_delete(name)


@pytest.fixture
def store(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[SQLAlchemyStore]:
    monkeypatch.setattr(republish, "_blind", QuietLog(republish.logger, logging.WARNING))
    store = SQLAlchemyStore.from_url(db_url)
    yield store
    store.close()


def dispatch(store: SQLAlchemyStore, app: Celery, queue: str, at: datetime) -> None:
    """Three tasks of type ``t`` published at ``at``; their messages then
    leave the queue (a worker took them; no task event came)."""
    store.create_task_type(TaskType(type="t", backend_name="proj.t", queue=queue))
    store.create_tasks(
        [
            Task(
                type="t",
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=at,
                deadline=at,
            )
            for n in range(3)
        ],
        now=at,
    )
    assert tick(store, app, at).published == 3
    wait_until(lambda: queue_depth(app, queue) == 3, 15, f"3 messages in {queue}")
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)
    wait_until(lambda: queue_depth(app, queue) == 0, 15, f"{queue} empty")


def test_runs_a_live_worker_without_task_events_may_hold_are_not_sent_again(
    store: SQLAlchemyStore, app: Celery, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    at = datetime.now(tz=UTC)
    store.record_worker_sightings([WorkerSighting(BLIND, at - H, True, 2.0, 4242)])
    dispatch(store, app, queue, at)
    store.mark_blind_workers([BlindWindow(BLIND, since=at - S)])
    later = at + 2 * FIVE_MIN
    store.record_worker_sightings([WorkerSighting(BLIND, later, True, 2.0, 4242)])
    with caplog.at_level(logging.WARNING, logger=republish.logger.name):
        assert republish_unstarted(store, app, later, older_than=FIVE_MIN) == 0
    assert queue_depth(app, queue) == 0
    warned = [r.getMessage() for r in caplog.records if BLIND in r.getMessage()]
    assert len(warned) == 1
    assert "runs of t dispatched since it began that never started are not published" in (warned[0])
    # the worker goes offline: its runs are lost, published again
    store.record_worker_sightings([WorkerSighting(BLIND, later + S, False, 2.0, 4242)])
    assert republish_unstarted(store, app, later + S, older_than=FIVE_MIN) == 3
    wait_until(lambda: queue_depth(app, queue) == 3, 15, f"3 messages in {queue}")


def test_a_closed_window_holds_only_the_runs_dispatched_before_it_ended(
    store: SQLAlchemyStore, app: Celery, queue: str
) -> None:
    at = datetime.now(tz=UTC)
    store.record_worker_sightings([WorkerSighting(BLIND, at - H, True, 2.0, 4242)])
    dispatch(store, app, queue, at)
    # events were turned on before the dispatch: the runs are not its
    store.mark_blind_workers([BlindWindow(BLIND, at - H, at - S, ("proj.t",))])
    later = at + 2 * FIVE_MIN
    assert republish_unstarted(store, app, later, older_than=FIVE_MIN) == 3


def test_a_window_of_other_tasks_holds_nothing_of_this_type(
    store: SQLAlchemyStore, app: Celery, queue: str
) -> None:
    at = datetime.now(tz=UTC)
    store.record_worker_sightings([WorkerSighting(BLIND, at - H, True, 2.0, 4242)])
    dispatch(store, app, queue, at)
    store.mark_blind_workers([BlindWindow(BLIND, at, at + S, ("proj.other",))])
    later = at + 2 * FIVE_MIN
    assert republish_unstarted(store, app, later, older_than=FIVE_MIN) == 3
