"""The receivers of the soak's jobs' callbacks, in the test's process.

An HTTP server writes down each POST (``Idempotency-Key``, the run id of
``X-Swh-Task-Id``, its arrival), and a consumer each message of the notify
queue (``swh-key``, ``swh-task-id``, ``swh-published-at``, its arrival), as
JSON lines in the counter's Redis (:mod:`soakjobs` reads them).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import redis
import soakapp
from kombu import Connection


class Receivers:
    """The jobs' callback receivers (module doc)."""

    def __init__(self, counter: redis.Redis, prefix: str, broker_url: str) -> None:
        self.counter, self.prefix, self.broker_url = counter, prefix, broker_url
        self.stop = threading.Event()
        receivers = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                receivers.write(
                    "http",
                    key=self.headers.get("Idempotency-Key") or "?",
                    run=self.headers.get("X-Swh-Task-Id") or "?",
                )
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *_: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/callback"
        self.threads = [
            threading.Thread(target=self.http.serve_forever, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def key(self, kind: str) -> str:
        return f"{self.prefix}:{kind}:deliveries"

    def write(self, kind: str, **fields: Any) -> None:
        self.counter.rpush(self.key(kind), json.dumps({**fields, "t": time.time()}))

    def _consume(self) -> None:
        """Drain the notify queue, writing each message down (reconnecting)."""
        while not self.stop.is_set():
            with contextlib.suppress(Exception), Connection(self.broker_url) as conn:
                queue = conn.SimpleQueue(
                    soakapp.NOTIFY_QUEUE, queue_opts={"durable": True}, serializer="json"
                )
                while not self.stop.is_set():
                    try:
                        message = queue.get(timeout=0.5)
                    except queue.Empty:
                        continue
                    headers = message.headers or {}
                    published = str(headers.get("swh-published-at") or "")
                    at = datetime.fromisoformat(published).timestamp() if published else None
                    self.write(
                        "notify",
                        key=headers.get("swh-key") or "?",
                        run=headers.get("swh-task-id") or "?",
                        published=published,
                        published_t=at,
                    )
                    message.ack()
            self.stop.wait(0.5)

    def deliveries(self) -> dict[str, list[dict[str, Any]]]:
        return {
            kind: [json.loads(raw) for raw in self.counter.lrange(self.key(kind), 0, -1)]
            for kind in ("http", "notify")
        }

    def forget(self) -> None:
        self.counter.delete(self.key("http"), self.key("notify"))

    def close(self) -> None:
        self.stop.set()
        self.http.shutdown()
        self.http.server_close()
