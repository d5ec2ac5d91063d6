"""Jobs by key end to end (seed 004): the job body goes through the HTTP
API, a real runner, worker and listener carry it out, and what reached the
callbacks is counted where it arrived (a RabbitMQ queue, an HTTP server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import services
from kombu import Connection

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.intake.jobs import idempotency_key, task_key
from swh_like_scheduler.plumbing.reach import Reach
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app
from swh_like_workers import notify, webhook

sys.path.insert(0, str(Path(__file__).parents[1] / "integration" / "api"))
from api_server import WRITER, serving
from waiting import wait_until

ROOT = Path(__file__).parents[2]
SWH = [str(Path(sys.executable).parent / "swh"), "scheduler"]
pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.postgresql,
    pytest.mark.rabbitmq,
    pytest.mark.timeout(180),
]


class Platform:
    """A runner, a listener and a worker (real processes) on one database
    and RabbitMQ, serving the two callback types on private queues."""

    def __init__(self, db_url: str, logs: Path) -> None:
        self.prefix = f"swh-jobs-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.broker = services.amqp_url()
        self.env = {
            **os.environ,
            "SWH_SCHEDULER_DB_URL": db_url,
            "SWH_SCHEDULER_BROKER_URL": self.broker,
            # the test's HTTP receiver listens on loopback
            "SWH_SCHEDULER_CALLBACK_ALLOW": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.logs = logs
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        queues = f"{self.prefix}-notify,{self.prefix}-webhook"
        self._spawn("runner", [*SWH, "start-runner", "--period", "1", "--no-monitor"])
        self._spawn("listener", [*SWH, "start-listener", "--queue-name", f"{self.prefix}-ev"])
        celery = [sys.executable, "-m", "celery", "-A", "swh_like_scheduler.celery_app"]
        worker = ["worker", "-P", "solo", "-Q", queues, "-n", f"{self.prefix}@%h", "-E"]
        quiet = ["--without-gossip", "--without-mingle", "--loglevel", "WARNING"]
        self._spawn("worker", [*celery, *worker, *quiet])

    def _spawn(self, name: str, command: list[str]) -> None:
        log = (self.logs / f"{name}.log").open("ab")
        self.processes.append(
            subprocess.Popen(command, env=self.env, cwd=ROOT, stdout=log, stderr=log)
        )

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def logs_text(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text()[-3000:]}" for p in self.logs.glob("*.log"))


@pytest.fixture
def platform(postgres_url: str, tmp_path: Path) -> Iterator[tuple[Platform, str]]:
    store = SQLAlchemyStore.from_url(postgres_url)
    site = Platform(postgres_url, tmp_path)
    for module, name in ((notify, "notify"), (webhook, "webhook")):
        (spec,) = module.register()["task_types"]  # type: ignore[attr-defined]
        store.create_task_type(
            TaskType(type=name, backend_name=spec["backend_name"], queue=f"{site.prefix}-{name}")
        )
    site.start()
    # the test's receiver listens on loopback: allowed here, refused by default
    settings = ApiSettings(tokens=parse_tokens([f"{WRITER}:rw"]), reach=Reach.parse("127.0.0.1"))
    app = create_app(store, settings)
    try:
        with serving(app) as url:
            yield site, url
    finally:
        site.stop()
        store.close()


def _at(seconds: float) -> datetime:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0)


def _iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def test_a_job_put_changed_and_deleted(platform: tuple[Platform, str]) -> None:
    site, url = platform
    target, key = f"{site.prefix}-target", "training-invitations-42"
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {WRITER}"}, timeout=30)
    callback = {"type": "rabbitmq", "data": {"queue": target, "payload": {"id": "42"}}}
    a, b, c = _at(3), _at(4), _at(600)
    body = {"key": key, "schedules": [_iso(a), _iso(b), _iso(c)], "callback": callback}
    assert api.put(f"/jobs/{key}", json=body).status_code == 201
    received: list[str] = []
    with Connection(site.broker) as conn:
        inbox = conn.SimpleQueue(notify.target_queue(target))

        def take() -> bool:
            try:
                message = inbox.get(timeout=0.5)
            except inbox.Empty:
                return False
            received.append(message.headers[notify.KEY_HEADER])
            message.ack()
            return True

        def done(*instants: datetime) -> bool:
            shown = {i["at"]: i["state"] for i in api.get(f"/jobs/{key}").json()["instants"]}
            return all(shown[i.isoformat()] == "done" for i in instants)

        try:
            wait_until(lambda: take() and len(received) >= 2, 60, "two notifications")
            wait_until(lambda: done(a, b), 30, "the listener to record them")
            # C is left out (it has not run), A and B given again (they ran), D added
            d = _at(2)
            body["schedules"] = [_iso(a), _iso(b), _iso(d)]
            changed = api.put(f"/jobs/{key}", json=body).json()
            assert changed["removed"] == [c.isoformat()] and changed["added"] == [d.isoformat()]
            wait_until(lambda: take() and len(received) >= 3, 60, "the third notification")
            wait_until(lambda: done(d), 30, "the listener to record it")
            # E added, then the whole job deleted before E's time
            e = _at(600)
            body["schedules"] = [_iso(a), _iso(b), _iso(d), _iso(e)]
            assert api.put(f"/jobs/{key}", json=body).json()["added"] == [e.isoformat()]
            deleted = api.delete(f"/jobs/{key}").json()
            assert deleted["removed"] == [e.isoformat()]
            take()  # a copy would be here by now: A, B and D ran seconds ago
        except AssertionError:
            raise AssertionError(site.logs_text()) from None
        finally:
            inbox.close()
            with Connection(site.broker) as cleanup:
                cleanup.default_channel.queue_delete(target)
    assert sorted(received) == sorted(task_key(key, t) for t in (a, b, d))
    states = {i["at"]: i["state"] for i in api.get(f"/jobs/{key}").json()["instants"]}
    assert states == {
        a.isoformat(): "done",
        b.isoformat(): "done",
        c.isoformat(): "cancelled",
        d.isoformat(): "done",
        e.isoformat(): "cancelled",
    }


def test_an_http_callback_gets_its_idempotency_key(platform: tuple[Platform, str]) -> None:
    site, url = platform
    seen: list[tuple[dict[str, str], Any]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            seen.append((dict(self.headers), json.loads(body)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {WRITER}"}, timeout=30)
    at = _at(2)
    hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
    body = {
        "schedules": [_iso(at)],
        "callback": {"type": "http", "data": {"url": hook, "payload": {"remind": "yes"}}},
    }
    try:
        assert api.put("/jobs/hook-1", json=body).status_code == 201
        wait_until(lambda: seen, 60, "the callback")

        def done() -> bool:
            return api.get("/jobs/hook-1").json()["instants"][0]["state"] == "done"

        wait_until(done, 30, "the listener to record it")
    except AssertionError:
        raise AssertionError(site.logs_text()) from None
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    ((headers, payload),) = seen
    assert payload == {"remind": "yes"}
    assert headers[webhook.IDEMPOTENCY_HEADER] == idempotency_key("hook-1", at)
