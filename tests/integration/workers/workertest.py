"""Helpers of the example task type tests: test apps, embedded workers, queue
clean-up, and a local HTTP server whose pages a test rewrites."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import services
from celery import Celery
from celery.contrib.testing.worker import start_worker

from swh_like_scheduler.plumbing.celery_factory import make_app


def redis_db_url(db: int) -> str:
    """The test Redis server's URL with database ``db``."""
    parts = urllib.parse.urlsplit(services.redis_url())
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


def make_test_app(broker_url: str, **overrides: Any) -> Celery:
    """A product-configured app on ``broker_url``, results in Redis database 2."""
    settings: dict[str, Any] = {
        "result_backend": redis_db_url(2),
        "broker_connection_timeout": 3,
        "broker_connection_retry_on_startup": False,
        # AMQP heartbeats wake the embedded worker's loop, so it stops quickly
        "broker_heartbeat": 2,
        "worker_hijack_root_logger": False,
        **overrides,
    }
    return make_app(config_module=None, broker_url=broker_url, load_workers=False, **settings)


def unique_queue(prefix: str) -> str:
    return f"swh-test-{prefix}-{os.getpid()}-{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def worker(app: Celery, *queues: str) -> Iterator[None]:
    """A real worker (solo pool, in a thread) consuming ``queues``; the queues
    are deleted afterwards."""
    try:
        with start_worker(
            app,
            pool="solo",
            perform_ping_check=False,
            queues=list(queues),
            loglevel="WARNING",
            shutdown_timeout=10,
        ):
            yield
    finally:
        delete_queues(app, *queues)


def delete_queues(app: Celery, *names: str) -> None:
    """Delete queues and what the broker keeps beside them (kombu's Redis
    bindings and priority lists; the direct exchange Celery declares on AMQP)."""
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        if conn.transport.driver_type == "redis":
            keys = {
                channel._q_for_pri(name, step) for name in names for step in channel.priority_steps
            }
            for name in names:
                keys |= {f"_kombu.binding.{name}", f"_kombu.binding_permanent.{name}"}
            channel.client.delete(*keys)
            return
        for name in names:
            for delete in ("queue_delete", "exchange_delete"):
                try:
                    getattr(channel, delete)(name)
                except Exception:  # not found: AMQP closes the channel
                    channel = conn.channel()


# --------------------------------------------------------------------------- #
# a web server whose pages the test changes
# --------------------------------------------------------------------------- #


@dataclass
class Page:
    status: int = 200
    body: bytes = b""
    etag: str | None = None


@dataclass
class PageServer:
    """Pages by path; ``requests`` records ``(path, If-None-Match)`` per GET."""

    pages: dict[str, Page] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    delay: float = 0.0
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def set(self, path: str, body: bytes, status: int = 200, etag: str | None = None) -> str:
        self.pages[path] = Page(status, body, etag)
        return self.url(path)


def _handler(site: PageServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            condition = self.headers.get("If-None-Match")
            site.requests.append((self.path, condition))
            if site.delay:
                time.sleep(site.delay)
            page = site.pages.get(self.path, Page(404, b"not found"))
            if page.etag is not None and condition == page.etag:
                self.send_response(304)
                self.send_header("ETag", page.etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(page.status)
            if page.etag is not None:
                self.send_header("ETag", page.etag)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page.body)))
            self.end_headers()
            self.wfile.write(page.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextlib.contextmanager
def http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """``handler`` served on 127.0.0.1 by a thread; yields the (free) port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextlib.contextmanager
def page_server() -> Iterator[PageServer]:
    """A :class:`PageServer` on 127.0.0.1 (a free port), served by a thread."""
    site = PageServer()
    with http_server(_handler(site)) as port:
        site.port = port
        yield site


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def visit_in_process(state_url: str, url: str, start_at: float) -> dict[str, Any]:
    """One visit from a separate process, starting at ``start_at`` (epoch)."""
    from swh_like_workers.webcheck import state_store, visit

    store = state_store(state_url)
    time.sleep(max(0.0, start_at - time.time()))
    return visit(store, url, timeout=10)
