"""Request body limits by method and exact path (issue 60): a ``GET`` or
``HEAD`` takes no body and is refused from its headers; the large limit is
a ``POST`` of a store call that writes, nothing else under ``/rpc``; each
console form has a limit near what it needs."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_server import READER, WRITER, serving
from fastapi import FastAPI

from swh_like_scheduler.api import ApiSettings, parse_tokens, routes_rpc
from swh_like_scheduler.api.state import CONSOLE_BODY_BYTES, CONSOLE_FORM_BYTES
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app

#: the plain limit and the large one of these tests
PLAIN, LARGE = 1000, 100_000


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore.from_url(sqlite_url)
    yield store
    store.close()


def _app(store: SQLAlchemyStore, **options: Any) -> FastAPI:
    tokens = parse_tokens(f"{WRITER}:rw,{READER}:ro")
    settings = ApiSettings(
        tokens=tokens, count_every=0, max_body_bytes=PLAIN, max_rpc_body_bytes=LARGE, **options
    )
    return create_app(store, settings)


@pytest.fixture
def limited(sqlite_store: SQLAlchemyStore) -> Iterator[tuple[FastAPI, str]]:
    app = _app(sqlite_store)
    with serving(app) as url:
        yield app, url


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _head_of_answer(port: int, request: bytes) -> tuple[bytes, float]:
    """Send ``request`` (a head, and none of the body it announces); the
    head of the answer and the seconds it took (a server that waits for the
    body answers nothing: the read times out)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        started = time.monotonic()
        sock.sendall(request)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
                answer += chunk
        except TimeoutError:
            pass
        return answer.partition(b"\r\n\r\n")[0], time.monotonic() - started


def _request(method: str, path: str, framing: bytes, token: str | None = WRITER) -> bytes:
    auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
    return b"%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s\r\n" % (
        method.encode(),
        path.encode(),
        auth,
        framing,
    )


#: a body announced and never sent: a server reading it would wait
FRAMINGS = (b"Content-Length: 250000000\r\n", b"Transfer-Encoding: chunked\r\n")


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_body_on_a_read_is_refused_from_its_headers(
    limited: tuple[FastAPI, str], method: str
) -> None:
    """Every kind of path, with a token: the announced body is not waited
    for (it was read up to the path's limit: 256 MB under /rpc)."""
    _, url = limited
    port = _port(url)
    for path in ("/tasks", "/rpc", "/rpc/import_tasks", "/rpc/search_tasks", "/health"):
        for framing in FRAMINGS:
            head, took = _head_of_answer(port, _request(method, path, framing))
            assert head.startswith(b"HTTP/1.1 413"), (method, path, framing, head)
            assert took < 2, (method, path, took)
    # no body said: served as before
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {WRITER}"}) as http:
        empty = http.request(method, "/tasks", headers={"Content-Length": "0"})
        assert empty.status_code == (200 if method == "GET" else 405)  # HEAD: no route
        answer = http.request(method, "/rpc/import_tasks", content=b'{"kwargs": {}}')
        assert answer.status_code == 413
        if method == "GET":
            assert answer.json()["detail"] == "a GET request takes no body"


def test_a_body_on_a_read_is_refused_under_open_reads(sqlite_store: SQLAlchemyStore) -> None:
    """Under --open-reads a GET needs no token: its body is refused all the
    same, before it is read."""
    with serving(_app(sqlite_store, open_reads=True)) as url:
        for framing in FRAMINGS:
            request = _request("GET", "/rpc/import_tasks", framing, token=None)
            head, took = _head_of_answer(_port(url), request)
            assert head.startswith(b"HTTP/1.1 413"), head
            assert took < 2, took
        assert httpx.get(f"{url}/tasks").status_code == 200


def test_only_a_post_of_a_write_method_has_the_large_limit(limited: tuple[FastAPI, str]) -> None:
    """A body past the plain limit is taken (and then judged) by a POST of a
    store call that writes only; a read, an unknown method and another
    method on a write's path get the plain limit (an unknown method's POST
    and a PUT had the large one, and were read whole before their 404 or
    405)."""
    _, url = limited
    body = b'{"kwargs": {"x": "' + b"y" * 4000 + b'"}}'
    assert PLAIN < len(body) < LARGE
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {WRITER}"}) as http:
        for name in sorted(routes_rpc.WRITE_METHODS):
            answer = http.post(f"/rpc/{name}", content=body)
            assert answer.status_code not in (413, 500), (name, answer.status_code)
        for name in sorted(routes_rpc.READ_METHODS):
            answer = http.post(f"/rpc/{name}", content=body)
            assert answer.status_code == 413, (name, answer.status_code)
        assert http.post("/rpc/no_such_method", content=body).status_code == 413
        for method in ("PUT", "PATCH", "DELETE"):
            answer = http.request(method, "/rpc/import_tasks", content=body)
            assert answer.status_code == 413, (method, answer.status_code)
        assert http.post("/tasks", content=body).status_code == 413
        # past the large limit, a write's POST too
        too_large = http.post("/rpc/import_tasks", content=b"x" * (LARGE + 1))
        assert too_large.status_code == 413


def _console_posts(app: FastAPI) -> list[str]:
    """The console's POST routes, their parameters filled in."""
    found: list[str] = []

    def walk(routes: Any) -> None:
        for route in routes:
            inner = getattr(route, "original_router", None)
            if inner is not None:
                walk(inner.routes)
            elif route.path.startswith("/console/") and "POST" in getattr(route, "methods", ()):
                found.append(re.sub(r"\{[^}]+\}", "1", route.path))

    walk(app.router.routes)
    return sorted(set(found))


def test_each_console_form_has_a_limit_near_what_it_needs(limited: tuple[FastAPI, str]) -> None:
    """Each console door that takes a form (a login, a logout, an action,
    a recount, a bulk action, a login link) is refused a body past a few
    kB at once (a login took 16 kB, any form the same), and takes one up to
    its limit."""
    app, url = limited
    posts = _console_posts(app)
    assert {"/console/login", "/console/logout", "/console/bulk", "/console/tasks/1/1"} <= set(
        posts
    ), posts
    port = _port(url)
    for path in posts:
        limit = CONSOLE_FORM_BYTES.get(path, CONSOLE_BODY_BYTES)
        assert limit <= 8192, path
        over = _request("POST", path, b"Content-Length: %d\r\n" % (limit + 1), token=None)
        head, took = _head_of_answer(port, over)
        assert head.startswith(b"HTTP/1.1 413"), (path, head)
        assert took < 2, (path, took)
        taken = httpx.post(f"{url}{path}", content=b"a=" + b"b" * (limit - 2), timeout=30)
        assert taken.status_code != 413, path
    # a real login fits its form
    login = httpx.post(
        f"{url}/console/login",
        data={"token": WRITER, "next": "/console/problems?q=" + "é" * 200},
        timeout=30,
    )
    assert login.status_code == 303, login.text
