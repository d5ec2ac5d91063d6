"""The web page checker on real workers, brokers and state stores, against a
local HTTP server whose pages change."""

from __future__ import annotations

import hashlib
import multiprocessing
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from workertest import (
    PageServer,
    closed_port,
    make_test_app,
    page_server,
    redis_db_url,
    unique_queue,
    visit_in_process,
    worker,
)

from swh_like_workers import webcheck
from swh_like_workers.webcheck import TASK_NAME, record_key, state_store, state_url_for

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]


@pytest.fixture
def site() -> Iterator[PageServer]:
    with page_server() as server:
        yield server


@pytest.fixture
def forget_urls() -> Iterator[list[tuple[str, str]]]:
    """``(state url, page url)`` pairs whose records are deleted after the test."""
    seen: list[tuple[str, str]] = []
    yield seen
    for state_url, url in seen:
        store = state_store(state_url)
        store.delete(record_key(url))


def sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def check(app: Celery, queue: str, url: str, **kwargs: Any) -> Any:
    """The outcome of one run: its result, or the exception it raised."""
    result = app.send_task(TASK_NAME, kwargs={"url": url, **kwargs}, queue=queue)
    value = result.get(timeout=15, propagate=False)
    assert result.state in ("SUCCESS", "FAILURE")
    return value


def test_reports_changes_gone_pages_and_failures(
    broker_url: str, site: PageServer, forget_urls: list[tuple[str, str]]
) -> None:
    app = make_test_app(broker_url)
    # by default the records live in the Redis result backend
    state_url = state_url_for(app.conf)
    assert state_url == redis_db_url(2)
    queue = unique_queue("webcheck")
    page = site.set("/page", b"<p>version 1</p>")
    tagged = site.set("/tagged", b"<p>tagged 1</p>", etag='"t1"')
    forget_urls.extend((state_url, url) for url in (page, tagged))

    with worker(app, queue):
        first = check(app, queue, page)
        same = check(app, queue, page)
        site.set("/page", b"<p>version 2</p>")
        changed = check(app, queue, page)
        unchanged = check(app, queue, page)

        tagged_first = check(app, queue, tagged)
        not_modified = check(app, queue, tagged)
        site.set("/tagged", b"<p>tagged 2</p>", etag='"t2"')
        tagged_changed = check(app, queue, tagged)

        missing = check(app, queue, site.url("/missing"))
        gone = check(app, queue, site.set("/gone", b"", status=410))
        server_error = check(app, queue, site.set("/error", b"oops", status=500))
        refused = check(app, queue, f"http://127.0.0.1:{closed_port()}/")
        not_http = check(app, queue, "file:///etc/passwd")

    assert first == {
        "status": "eventful",
        "url": page,
        "digest": sha256(b"<p>version 1</p>"),
        "changed": True,
        "http_status": 200,
        "bytes": 16,
    }
    assert same == {**first, "status": "uneventful", "changed": False}
    assert changed == {**first, "digest": sha256(b"<p>version 2</p>")}
    assert unchanged == {**changed, "status": "uneventful", "changed": False}

    # validators are sent back; a 304 is an uneventful visit without a body
    assert tagged_first["status"] == "eventful" and tagged_first["bytes"] == 15
    assert not_modified == {
        **tagged_first,
        "status": "uneventful",
        "changed": False,
        "http_status": 304,
        "bytes": 0,
    }
    assert tagged_changed["status"] == "eventful"
    assert tagged_changed["digest"] == sha256(b"<p>tagged 2</p>")
    conditions = [condition for path, condition in site.requests if path == "/tagged"]
    assert conditions == [None, '"t1"', '"t1"']

    assert missing["status"] == gone["status"] == "permfailed"
    assert (missing["http_status"], gone["http_status"]) == (404, 410)
    assert isinstance(server_error, Exception) and "HTTP 500" in str(server_error)
    assert isinstance(refused, Exception) and "127.0.0.1" in str(refused)
    assert not_http["status"] == "permfailed" and "http" in not_http["error"]
    # failures and gone pages leave no record behind
    store = state_store(state_url)
    assert store.load(record_key(site.url("/error"))) is None
    assert store.load(record_key(site.url("/missing"))) is None


@pytest.mark.redis
@pytest.mark.rabbitmq
def test_two_apps_on_different_brokers_share_the_records(
    site: PageServer, tmp_path: Path, forget_urls: list[tuple[str, str]]
) -> None:
    from services import amqp_url, redis_url

    # the explicit setting wins over the Redis result backend
    state_url = f"sqlite:///{tmp_path / 'webcheck.sqlite'}"
    apps = [
        make_test_app(url, swh_webcheck_state_url=state_url) for url in (redis_url(), amqp_url())
    ]
    assert {state_url_for(app.conf) for app in apps} == {state_url}
    queue = unique_queue("webcheck-shared")
    page = site.set("/shared", b"one")
    forget_urls.append((state_url, page))

    def run_on(app: Celery) -> str:
        with worker(app, queue):
            return str(check(app, queue, page)["status"])

    assert run_on(apps[0]) == "eventful"
    assert run_on(apps[1]) == "uneventful"
    site.set("/shared", b"two")
    assert run_on(apps[1]) == "eventful"
    assert run_on(apps[0]) == "uneventful"


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("sqlite"),
        pytest.param("postgresql", marks=pytest.mark.postgresql),
    ]
)
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "redis":
        return redis_db_url(2)
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'webcheck.sqlite'}"
    return str(request.getfixturevalue("postgres_url"))


def test_concurrent_visits_from_several_processes_report_each_change_once(
    state_url: str, site: PageServer, forget_urls: list[tuple[str, str]]
) -> None:
    processes = 4
    page = site.set("/contended", b"first")
    forget_urls.append((state_url, page))
    # every visit reads the record before any of them writes it
    site.delay = 0.2
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes) as pool:

        def round_of_visits() -> list[dict[str, Any]]:
            start_at = time.time() + 0.3
            return pool.starmap(visit_in_process, [(state_url, page, start_at)] * processes)

        pool.starmap(time.sleep, [(0,)] * processes)  # the processes are up
        rounds = [round_of_visits()]
        rounds.append(round_of_visits())
        site.set("/contended", b"second")
        rounds.append(round_of_visits())

    statuses = [sorted(r["status"] for r in visits) for visits in rounds]
    assert statuses == [
        ["eventful"] + ["uneventful"] * 3,
        ["uneventful"] * 4,
        ["eventful"] + ["uneventful"] * 3,
    ]
    assert {r["digest"] for r in rounds[2]} == {sha256(b"second")}
    record = state_store(state_url).load(record_key(page))
    assert record is not None and record.digest == sha256(b"second")


def test_state_url_follows_the_configuration(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(webcheck, "default_state_path", lambda: tmp_path / "d" / "w.sqlite")
    amqp = "amqp://guest:guest@127.0.0.1:5672//"
    assert state_url_for({"broker_url": amqp}) == f"sqlite:///{tmp_path / 'd' / 'w.sqlite'}"
    assert (tmp_path / "d").is_dir()
    assert state_url_for({"broker_url": "redis://127.0.0.1:6379/0"}) == ("redis://127.0.0.1:6379/0")
    assert (
        state_url_for({"broker_url": amqp, "result_backend": "redis://127.0.0.1:6379/3"})
        == "redis://127.0.0.1:6379/3"
    )
    assert (
        state_url_for({"broker_url": "redis+socket:///run/redis.sock"}) == "unix:///run/redis.sock"
    )
    assert state_url_for(
        {"broker_url": "redis://h/0", "swh_webcheck_state_url": "sqlite:///x"}
    ) == ("sqlite:///x")
