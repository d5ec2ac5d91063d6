"""The webhook worker connects to the address it checked: a name that
answers an allowed address to the check and loopback to a second lookup
(DNS rebinding) still reaches the allowed one, and a redirect is not
followed. Two real HTTP servers on one port, on 127.0.0.2 (allowed) and
127.0.0.1 (not), tell which one a request reached."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from workertest import make_test_app, unique_queue, worker

from swh_like_scheduler.plumbing.reach import Reach
from swh_like_workers.webhook import TASK_NAME, pinned_request

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]

NAME = "hooks.rebinding.example"


class Site:
    """One HTTP server: the ``(path, Host header)`` of each request, and a
    redirect answered for ``/moved``."""

    def __init__(self, address: str, port: int, moved_to: str = "") -> None:
        self.received: list[tuple[str, str]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                site.received.append((self.path, self.headers.get("Host", "")))
                moved = self.path == "/moved"
                self.send_response(302 if moved else 200)
                if moved:
                    self.send_header("Location", moved_to)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((address, port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@contextlib.contextmanager
def two_sites() -> Iterator[tuple[Site, Site]]:
    """``(allowed, inside)``: servers on 127.0.0.2 and 127.0.0.1, one port."""
    inside = Site("127.0.0.1", 0)
    try:
        allowed = Site("127.0.0.2", inside.port, moved_to=f"http://127.0.0.1:{inside.port}/x")
    except OSError:
        inside.close()
        raise
    try:
        yield allowed, inside
    finally:
        allowed.close()
        inside.close()


class Rebinding:
    """``socket.getaddrinfo`` for :data:`NAME`: the answers given in turn
    (the last one repeated); every other host is looked up as usual."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.lookups = 0
        real = socket.getaddrinfo

        def lookup(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if host != NAME:
                return real(host, port, *args, **kwargs)
            answer = self.answers[min(self.lookups, len(self.answers) - 1)]
            self.lookups += 1
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port or 0))
                for address in answer
            ]

        monkeypatch.setattr(socket, "getaddrinfo", lookup)


@pytest.mark.redis
def test_the_request_goes_to_the_checked_address_not_to_a_second_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import services

    app = make_test_app(services.redis_url(), swh_scheduler_callback_allow="127.0.0.2,127.0.0.3")
    tasks = unique_queue("webhook-pin")
    with two_sites() as (allowed, inside):
        url = f"http://{NAME}:{allowed.port}"
        kwargs = {"payload": {"n": 1}, "idempotency_key": "k-pin"}
        with worker(app, tasks):
            # allowed to the check, loopback to any lookup after it
            rebinding = Rebinding(monkeypatch, ["127.0.0.2"], ["127.0.0.1"])
            sent = app.send_task(TASK_NAME, kwargs={**kwargs, "url": f"{url}/hook"}, queue=tasks)
            assert sent.get(timeout=15) == {"status": "eventful", "code": 200}
            assert rebinding.lookups == 1
            # one answer holding an allowed and a loopback address: refused
            Rebinding(monkeypatch, ["127.0.0.2", "127.0.0.1"])
            mixed = app.send_task(TASK_NAME, kwargs={**kwargs, "url": f"{url}/mixed"}, queue=tasks)
            answer = mixed.get(timeout=15)
            assert answer["status"] == "permfailed" and "127.0.0.1 is loopback" in answer["error"]
            # an address that refuses the connection: the next checked one
            Rebinding(monkeypatch, ["127.0.0.3", "127.0.0.2"], ["127.0.0.1"])
            retried = app.send_task(TASK_NAME, kwargs={**kwargs, "url": f"{url}/next"}, queue=tasks)
            assert retried.get(timeout=15) == {"status": "eventful", "code": 200}
            # a redirect from the allowed address to loopback is not followed
            Rebinding(monkeypatch, ["127.0.0.2"])
            moved = app.send_task(TASK_NAME, kwargs={**kwargs, "url": f"{url}/moved"}, queue=tasks)
            answer = moved.get(timeout=15)
            assert answer["status"] == "permfailed" and "not followed" in answer["error"]
    host = f"{NAME}:{allowed.port}"
    assert allowed.received == [("/hook", host), ("/next", host), ("/moved", host)]
    assert inside.received == []


def test_an_https_request_names_the_host_for_tls_and_connects_to_the_address() -> None:
    destination = Reach().destination(
        "https://Hooks.Example.org./in?x=1", resolver=lambda host: [ipaddress.ip_address("8.8.8.8")]
    )
    with httpx.Client() as client:
        request = pinned_request(
            client,
            "POST",
            "https://Hooks.Example.org./in?x=1",
            destination,
            destination.addresses[0],
            b"{}",
            {"host": "evil.example", "X-A": "1"},
        )
    assert str(request.url) == "https://8.8.8.8/in?x=1"
    assert request.headers["Host"] == "hooks.example.org"
    assert request.headers.get_list("host") == ["hooks.example.org"]
    assert request.extensions["sni_hostname"] == "hooks.example.org"
    assert request.headers["X-A"] == "1"
    plain = Reach().destination("http://[::ffff:8.8.8.8]:81/", resolver=None)
    with httpx.Client() as client:
        request = pinned_request(
            client, "PUT", "http://[::ffff:8.8.8.8]:81/", plain, plain.addresses[0], b"", {}
        )
    assert request.url.host == "::ffff:808:808" and request.url.port == 81
    assert "sni_hostname" not in request.extensions
