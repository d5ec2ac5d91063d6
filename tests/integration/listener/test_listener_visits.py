"""The origin-visit loop on PostgreSQL with Redis and RabbitMQ:
schedule-recurrent sends visits, a real Celery worker runs a loader on the
VisitTask base, and the listener applies each visit's status to its
origin's statistics (counted from the loader's own calls)."""

from __future__ import annotations

import random
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from listenertest import listener_thread, make_test_app, options, unique_queue_name, wait_until
from waiting import delete_queues

from swh_like_scheduler.broker.port import CeleryBroker
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.listener import Listener
from swh_like_scheduler.recurrent.scheduler import schedule_type
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import DEFAULT_OFFSET, LastVisitStatus, ListedOrigin
from swh_like_scheduler.visits.policy import VisitPolicy, VisitSettings
from swh_like_scheduler.worker.visit import VisitTask

pytestmark = [pytest.mark.postgresql]

#: what the loader does with each origin: its result, or raise
PLAN = {
    "eventful": {"status": "eventful", "snapshot_id": "ab" * 20},
    "uneventful": {"status": "uneventful"},
    "missing": {"status": "not_found"},
    "broken": None,
}


def test_visits_sent_run_and_come_back_as_statistics(
    pg_store: SQLAlchemyStore, broker_url: str
) -> None:
    app = make_test_app(broker_url)
    name = f"tests.load_page_{uuid.uuid4().hex[:8]}"
    calls: list[str] = []
    lock = threading.Lock()

    @app.task(base=VisitTask, name=name, shared=False)
    def load_page(url: str, **extra: Any) -> dict[str, Any]:
        with lock:
            calls.append(url)
        outcome = PLAN[url.rsplit("/", 2)[-2]]
        if outcome is None:
            raise RuntimeError("the forge answered 500")
        return outcome

    queue = f"swh-test-visits-{uuid.uuid4().hex[:8]}"
    pg_store.create_task_type(
        TaskType(type="load-page", backend_name=name, queue=queue, max_queue_length=100)
    )
    lister = str(pg_store.get_or_create_lister("pages").id)
    urls = [f"https://forge.example/{kind}/{n}" for kind in PLAN for n in range(3)]
    pg_store.record_listed_origins([ListedOrigin(lister, u, "page") for u in urls])
    settings = VisitSettings(mixes={"page": {VisitPolicy.OLDEST_SCHEDULED_FIRST: 1}})
    events = unique_queue_name()
    listener = Listener(app, pg_store, rng=random.Random(1), options=options(events))

    def visited() -> list[Any]:
        found = pg_store.origin_visit_stats_get([(u, "page") for u in urls])
        return [s for s in found if s.last_visit is not None]

    try:
        with listener_thread(listener):
            now = datetime.now(UTC)
            assert schedule_type(pg_store, CeleryBroker(app), "page", settings, now).sent == 12
            with start_worker(
                app,
                pool="threads",
                concurrency=4,
                perform_ping_check=False,
                queues=[queue],
                shutdown_timeout=10,
            ):
                wait_until(lambda: len(visited()) == 12, 40, "every visit's status")
    finally:
        delete_queues(app, queue, events)
    assert sorted(calls) == sorted(urls)  # one body per origin
    by_kind: dict[str, set[tuple[Any, ...]]] = {}
    for stats in visited():
        kind = stats.url.rsplit("/", 2)[-2]
        assert stats.last_scheduled == now and stats.last_visit >= now - timedelta(seconds=1)
        by_kind.setdefault(kind, set()).add(
            (stats.last_visit_status, stats.last_snapshot, stats.next_position_offset)
        )
    assert by_kind == {
        "eventful": {(LastVisitStatus.SUCCESSFUL, "ab" * 20, DEFAULT_OFFSET - 2)},
        "uneventful": {(LastVisitStatus.SUCCESSFUL, None, DEFAULT_OFFSET + 1)},
        "missing": {(LastVisitStatus.NOT_FOUND, None, DEFAULT_OFFSET)},
        "broken": {(LastVisitStatus.FAILED, None, DEFAULT_OFFSET)},
    }
