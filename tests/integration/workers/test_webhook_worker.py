"""The HTTP callback on a real worker, against a local HTTP server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from workertest import closed_port, http_server, make_test_app, unique_queue, worker

from swh_like_workers.webhook import IDEMPOTENCY_HEADER, TASK_ID_HEADER, TASK_NAME

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]


class Receiver:
    """Records each request ``(method, path, headers, JSON body)``; answers
    with the status set for its path (200 by default)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, dict[str, str], Any]] = []
        self.status: dict[str, int] = {}
        self.port = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    site = Receiver()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _receive(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            site.received.append((self.command, self.path, dict(self.headers), body))
            self.send_response(site.status.get(self.path, 200))
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PUT = _receive

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with http_server(Handler) as port:
        site.port = port
        yield site


@pytest.mark.redis
def test_posts_with_the_same_idempotency_key_on_every_attempt(receiver: Receiver) -> None:
    import services

    # the receiver listens on loopback: this worker may post there
    app = make_test_app(services.redis_url(), swh_scheduler_callback_allow="127.0.0.1")
    tasks = unique_queue("webhook")
    payload = {"id": "42", "when": "pre"}
    kwargs = {"url": receiver.url("/hook"), "payload": payload, "idempotency_key": "k-1"}
    receiver.status["/down"] = 503
    receiver.status["/gone"] = 404
    with worker(app, tasks):
        first = app.send_task(TASK_NAME, kwargs=kwargs, queue=tasks)
        assert first.get(timeout=15) == {"status": "eventful", "code": 200}
        again = app.send_task(TASK_NAME, kwargs=kwargs, queue=tasks, task_id=first.id)
        assert again.get(timeout=15)["status"] == "eventful"
        down = app.send_task(
            TASK_NAME, kwargs={**kwargs, "url": receiver.url("/down")}, queue=tasks
        )
        with pytest.raises(Exception, match="HTTP 503"):
            down.get(timeout=15)
        gone = app.send_task(
            TASK_NAME, kwargs={**kwargs, "url": receiver.url("/gone")}, queue=tasks
        )
        assert gone.get(timeout=15)["status"] == "permfailed"
        closed = f"http://127.0.0.1:{closed_port()}/x"
        unreachable = app.send_task(TASK_NAME, kwargs={**kwargs, "url": closed}, queue=tasks)
        with pytest.raises(Exception, match="ConnectError"):
            unreachable.get(timeout=15)
        bad = app.send_task(TASK_NAME, kwargs={**kwargs, "url": "file:///etc"}, queue=tasks)
        assert bad.get(timeout=15)["status"] == "permfailed"
    hooks = [r for r in receiver.received if r[1] == "/hook"]
    assert len(hooks) == 2
    for method, _, headers, body in hooks:
        assert method == "POST" and body == payload
        assert headers[IDEMPOTENCY_HEADER] == "k-1"
        assert headers[TASK_ID_HEADER] == first.id
        assert headers["Content-Type"] == "application/json"
    assert [r[1] for r in receiver.received].count("/down") == 1


@pytest.mark.redis
def test_a_callback_to_a_non_public_address_is_refused_at_delivery(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job put before the rule, or by the Python API, still never makes the
    worker call inside its network: each delivery is checked (after the name
    is resolved), and refused as a permanent failure without a request."""
    import services

    monkeypatch.delenv("SWH_SCHEDULER_CALLBACK_ALLOW", raising=False)
    app = make_test_app(services.redis_url())
    tasks = unique_queue("webhook")
    kwargs = {"payload": {}, "idempotency_key": "k-2"}
    with worker(app, tasks):
        for url in (receiver.url("/inside"), "http://localhost:9/", "http://169.254.169.254/"):
            refused = app.send_task(TASK_NAME, kwargs={**kwargs, "url": url}, queue=tasks)
            answer = refused.get(timeout=15)
            assert answer["status"] == "permfailed" and "not public" in answer["error"], answer
    assert receiver.received == []
