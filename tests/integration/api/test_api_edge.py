"""What every answer carries and every request meets at the API's edge
(issue 44): the safe headers on each answer (the documentation pages and
the middlewares' refusals included, the console's stricter policy kept),
an ``Allow`` header naming exactly the methods a path serves, and the
``Host`` header checked against the configured names."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_server import READER, WRITER, serving
from fastapi import FastAPI
from starlette.routing import Mount

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.api.state import DOCS_STATIC
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app

SAFE = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore.from_url(sqlite_url)
    yield store
    store.close()


def _app(store: SQLAlchemyStore, **options: Any) -> FastAPI:
    tokens = parse_tokens(f"{WRITER}:rw,{READER}:ro")
    return create_app(store, ApiSettings(tokens=tokens, count_every=0, **options))


@pytest.fixture
def edge(sqlite_store: SQLAlchemyStore) -> Iterator[tuple[FastAPI, str]]:
    # a body limit small enough to see a 413
    app = _app(sqlite_store, max_body_bytes=1000)
    with serving(app) as url:
        yield app, url


def _safe(answer: httpx.Response, *, stored: bool = False) -> None:
    for name, value in SAFE.items():
        assert answer.headers.get(name) == value, (answer.request.url, name, answer.headers)
    assert answer.headers["content-security-policy"] == "frame-ancestors 'none'"
    if not stored:
        assert answer.headers.get("cache-control") == "no-store", answer.request.url


def test_every_answer_has_the_safe_headers(edge: tuple[FastAPI, str]) -> None:
    _, url = edge
    token = {"Authorization": f"Bearer {WRITER}"}
    with httpx.Client(base_url=url, timeout=30) as http:
        answers = {
            "json": http.get("/task-types", headers=token),
            "docs": http.get("/docs"),
            "redoc": http.get("/redoc"),
            "openapi": http.get("/openapi.json"),
            "401": http.get("/tasks"),
            "403": http.post("/tasks", headers={"Authorization": f"Bearer {READER}"}),
            "413": http.post("/tasks", headers=token, content=b"x" * 2000),
            "404": http.get("/tasks/999", headers=token),
            "405": http.delete("/tasks", headers=token),
            "422": http.get("/tasks?limit=0", headers=token),
        }
        expected = {"json": 200, "docs": 200, "redoc": 200, "openapi": 200}
        for what, answer in answers.items():
            assert answer.status_code == expected.get(what, int(what) if what.isdigit() else 0)
            _safe(answer)
        script = http.get(f"{DOCS_STATIC}/swagger-ui-bundle.js")
        assert script.status_code == 200
        _safe(script, stored=True)  # a package file may be cached
        assert "no-store" not in script.headers.get("cache-control", "")


def test_a_429_has_the_safe_headers(sqlite_store: SQLAlchemyStore) -> None:
    # one request in two seconds, ten at once: asked until refused (on a
    # slow machine twelve requests took long enough to earn tokens back),
    # at most 40 times (40 requests in under 60 s overdraw the bucket)
    with serving(_app(sqlite_store, rate_limit=0.5)) as url:
        limited: list[httpx.Response] = []
        while len(limited) < 40 and (not limited or limited[-1].status_code != 429):
            limited.append(httpx.get(f"{url}/health", timeout=30))
    assert limited[-1].status_code == 429, [a.status_code for a in limited]
    assert len(limited) >= 11, [a.status_code for a in limited]  # the burst was served
    _safe(limited[-1])


def test_the_console_keeps_its_own_policy(edge: tuple[FastAPI, str]) -> None:
    _, url = edge
    page = httpx.get(f"{url}/console/login", timeout=30)
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert policy.startswith("default-src 'none'") and "frame-ancestors 'none'" in policy
    assert page.headers.get_list("content-security-policy") == [policy]  # not a second one
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"


def test_an_unhandled_error_has_the_safe_headers(sqlite_store: SQLAlchemyStore) -> None:
    class Failing:
        """The store, but listing task types fails as no handler expects."""

        def __getattr__(self, name: str) -> Any:
            return getattr(sqlite_store, name)

        def get_task_types(self) -> Any:
            raise RuntimeError("not a scheduler error")

    app = _app(sqlite_store)
    app.state.api.store = Failing()
    with serving(app) as url:
        answer = httpx.get(
            f"{url}/task-types", headers={"Authorization": f"Bearer {WRITER}"}, timeout=30
        )
    assert answer.status_code == 500
    _safe(answer)


def _routes(routes: Any) -> Iterator[Any]:
    """The application's routes, those of included routers too."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _routes(inner.routes)
        else:
            yield route


def test_each_405_allows_exactly_what_its_path_serves(edge: tuple[FastAPI, str]) -> None:
    """Every route path of the application, asked with each method it does
    not serve: a 405 whose Allow names the methods of the path's routes, all
    of them (the router named only the first route it found: DELETE /tasks
    said POST only)."""
    app, url = edge
    served: dict[str, set[str]] = {}
    mounts = []
    for route in _routes(app.routes):
        if isinstance(route, Mount):
            mounts.append(route.path)
        else:
            served.setdefault(route.path, set()).update(route.methods)
    # the walk went into the included routers
    assert served["/tasks"] == {"GET", "POST"} and served["/rpc/{method}"] == {"POST"}
    token = {"Authorization": f"Bearer {WRITER}"}
    checked = 0
    with httpx.Client(base_url=url, headers=token, timeout=30) as http:
        for path, methods in sorted(served.items()):
            concrete = re.sub(r"\{[^}]+\}", "1", path)
            for method in METHODS:
                if method in methods:
                    continue
                answer = http.request(method, concrete)
                assert answer.status_code == 405, (method, concrete, answer.status_code)
                allow = {m.strip() for m in answer.headers["allow"].split(",")}
                assert allow == methods, (method, path, answer.headers["allow"])
                checked += 1
        for mount in mounts:  # static files: reads only
            answer = http.post(f"{mount}/file.js")
            assert answer.status_code == 405
            assert answer.headers["allow"] == "GET, HEAD"
    assert checked > 200


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def test_a_request_for_another_host_is_a_400(sqlite_store: SQLAlchemyStore) -> None:
    app = _app(sqlite_store, allowed_hosts=("api.example.org", "*.internal.example"))
    with serving(app) as url:
        port = int(url.rsplit(":", 1)[1])
        for host in ("api.example.org", "API.Example.org:8443", "a.internal.example"):
            answer = httpx.get(f"{url}/health", headers={"Host": host}, timeout=30)
            assert answer.status_code in (200, 503), (host, answer.text)
        for host in ("evil.example", "internal.example", "api.example.org.evil", "127.0.0.1"):
            answer = httpx.get(f"{url}/health", headers={"Host": host}, timeout=30)
            assert answer.status_code == 400, host
            assert "--allowed-hosts" in answer.json()["detail"]
            _safe(answer)
        # a token changes nothing, and a request without a Host is refused as well
        answer = httpx.get(
            f"{url}/tasks",
            headers={"Host": "evil.example", "Authorization": f"Bearer {WRITER}"},
            timeout=30,
        )
        assert answer.status_code == 400
        bare = _raw(port, b"GET /health HTTP/1.0\r\n\r\n")
        assert bare.startswith(b"HTTP/1.1 400"), bare[:100]


def test_any_host_is_served_when_none_is_configured(edge: tuple[FastAPI, str]) -> None:
    _, url = edge
    answer = httpx.get(f"{url}/health", headers={"Host": "whatever.example"}, timeout=30)
    assert answer.status_code in (200, 503)
