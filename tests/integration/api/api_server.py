"""A real HTTP server (uvicorn, in a thread, on a free loopback port) over
an app, for tests that talk to the API as a client does."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import uvicorn
from waiting import wait_until

WRITER = "writer-secret-0123456789"
READER = "reader-secret-0123456789"


class Clock:
    """The API's clock, set by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """The base URL of ``app`` served until the block ends."""
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY on the connections of a
    # socket whose protocol says TCP, and without it each kept-alive request
    # waited ~40 ms for the delayed ACK (Nagle)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 10, "the API server to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def remote(store: Any) -> Iterator[Any]:
    """``store`` served over HTTP, as seen through the remote store client."""
    from swh_like_scheduler.api import ApiSettings, parse_tokens
    from swh_like_scheduler.api.client import RemoteStore
    from swh_like_scheduler.web import create_app

    settings = ApiSettings(tokens=parse_tokens([f"{WRITER}:rw"]))
    with serving(create_app(store, settings)) as url:
        client = RemoteStore(url, token=WRITER)
        try:
            yield client
        finally:
            client.close()
