"""The example visit loader (task type ``load-page``) in a real ``celery
worker`` process with a prefork pool: pages served by the test are visited,
a changed page is an eventful visit, a page gone is ``not_found``, a server
error a failed visit; the statistics come back through the listener (each
visit counted from the page server's own log of requests)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from listenertest import listener_thread, make_test_app, options, unique_queue_name, wait_until
from waiting import delete_queues

from swh_like_scheduler.broker.port import CeleryBroker
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.listener import Listener
from swh_like_scheduler.recurrent.scheduler import schedule_type
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import DEFAULT_OFFSET, LastVisitStatus, ListedOrigin
from swh_like_scheduler.visits.policy import Cooldowns, VisitPolicy, VisitSettings
from swh_like_workers.pageload import TASK_NAME

pytestmark = [pytest.mark.postgresql, pytest.mark.timeout(180)]
SETTINGS = VisitSettings(
    cooldowns=Cooldowns(scheduled=0, no_result=0, failed=0, not_found=0),  # type: ignore[arg-type]
    mixes={"page": {VisitPolicy.OLDEST_SCHEDULED_FIRST: 1}},
)


@contextlib.contextmanager
def pages(content: dict[str, tuple[int, bytes]]) -> Iterator[tuple[str, list[str]]]:
    """A local web server of ``content`` (path: status, body), its base URL
    and the paths it was asked for."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            status, body = content.get(self.path, (404, b""))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def celery_worker(broker_url: str, queue: str) -> Iterator[subprocess.Popen[bytes]]:
    command = [
        str(Path(sys.executable).parent / "celery"),
        "-A",
        "swh_like_scheduler.celery_app",
        "worker",
        *("-P", "prefork", "-c", "2", "-E", "-Q", queue, "-l", "WARNING"),
        *("-n", f"pages-{uuid.uuid4().hex[:6]}@%h", "--without-mingle", "--without-gossip"),
    ]
    env = {**os.environ, "SWH_SCHEDULER_BROKER_URL": broker_url}
    env.pop("SWH_SCHEDULER_RESULT_BACKEND", None)
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_pages_visited_by_a_prefork_worker_come_back_as_statistics(
    pg_store: SQLAlchemyStore, broker_url: str
) -> None:
    app = make_test_app(broker_url)
    queue = f"swh-test-pages-{uuid.uuid4().hex[:8]}"
    pg_store.create_task_type(
        TaskType(type="load-page", backend_name=TASK_NAME, queue=queue, max_queue_length=50)
    )
    content = {"/changing": (200, b"first"), "/steady": (200, b"same"), "/broken": (500, b"")}
    events = unique_queue_name()
    listener = Listener(app, pg_store, rng=random.Random(1), options=options(events))
    with pages(content) as (base, asked):
        paths = ["/changing", "/steady", "/gone", "/broken"]
        urls = {p: f"{base}{p}" for p in paths}
        lister = str(pg_store.get_or_create_lister("pages").id)
        pg_store.record_listed_origins([ListedOrigin(lister, u, "page") for u in urls.values()])

        def stats() -> dict[str, Any]:
            found = pg_store.origin_visit_stats_get([(u, "page") for u in urls.values()])
            return {s.url.removeprefix(base): s for s in found}

        def visits_done(count: int) -> bool:
            return (
                sum(1 for s in stats().values() if s.successive_visits >= count and s.last_visit)
                == 4
            )

        try:
            with listener_thread(listener), celery_worker(broker_url, queue):
                first = datetime.now(UTC)
                assert schedule_type(pg_store, CeleryBroker(app), "page", SETTINGS, first).sent == 4
                wait_until(lambda: visits_done(1), 90, "the first visits")
                before = stats()
                content["/changing"] = (200, b"second")
                later = datetime.now(UTC) + timedelta(seconds=1)
                assert schedule_type(pg_store, CeleryBroker(app), "page", SETTINGS, later).sent == 4
                wait_until(
                    lambda: all(s.last_visit > before[p].last_visit for p, s in stats().items()),
                    90,
                    "the second visits",
                )
        finally:
            delete_queues(app, queue, events)
        after = stats()
    assert sorted(asked) == sorted(paths * 2)  # each page fetched once per visit
    assert after["/changing"].last_visit_status is LastVisitStatus.SUCCESSFUL
    assert after["/changing"].last_snapshot != before["/changing"].last_snapshot
    assert after["/changing"].next_position_offset == DEFAULT_OFFSET - 4  # two eventful
    assert after["/steady"].last_snapshot == before["/steady"].last_snapshot
    assert after["/steady"].next_position_offset == DEFAULT_OFFSET - 2 + 1  # then uneventful
    assert after["/gone"].last_visit_status is LastVisitStatus.NOT_FOUND
    assert after["/broken"].last_visit_status is LastVisitStatus.FAILED
    assert after["/broken"].successive_visits == 2
