"""What ``/rpc`` refuses before calling the store (issue 44): nesting deeper
than any call needs, before anything recurses over it (700 levels deep from
a read-only token was a plain-text 500 and thousands of log lines), and
arguments not of the method's annotations (a text where ids go was a 503,
"the database failed")."""

from __future__ import annotations

import re
import socket
from datetime import datetime
from typing import Any

import httpx
import pytest
from api_server import remote

from swh_like_scheduler.api.routes_rpc import MAX_RPC_DEPTH
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore, wire
from swh_like_scheduler.store.values import BulkAction, BulkFilter


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [MAX_RPC_DEPTH + 1, 700])
def test_a_read_nested_too_deep_is_a_422_naming_the_part(reader: httpx.Client, depth: int) -> None:
    for part, body in (
        ("kwargs", {"kwargs": {"ids": nested(depth)}}),
        ("args", {"args": [nested(depth)]}),
    ):
        answer = reader.post("/rpc/get_tasks", json=body)
        assert answer.status_code == 422, answer.text
        [detail] = answer.json()["detail"]
        assert detail["loc"] == ["body", part]
        assert f"more than {MAX_RPC_DEPTH} levels deep" in detail["msg"]


def test_a_body_too_deep_for_the_json_parser_is_a_400(reader: httpx.Client) -> None:
    raw = '{"kwargs": {"ids": ' + "[" * 100_000 + "1" + "]" * 100_000 + "}}"
    answer = reader.post(
        "/rpc/get_tasks", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400, answer.text


def test_task_arguments_as_deep_as_allowed_still_cross_the_wire(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    from swh_like_scheduler.domain.model import MAX_JSON_DEPTH

    def task(depth: int) -> Task:
        return Task(
            type="sleep",
            next_run=now,
            deadline=now,
            schedule_kind=ScheduleKind.ONESHOT,
            kwargs={"doc": nested(depth - 2)},  # the kwargs mapping and its list
        )

    with remote(store) as client:
        [created] = client.create_tasks([task(MAX_JSON_DEPTH)], now=now)
        assert created.kwargs == {"doc": nested(MAX_JSON_DEPTH - 2)}
        with pytest.raises(InvalidInput) as refused:
            client.create_tasks([task(MAX_JSON_DEPTH + 2)], now=now)
        assert refused.value.field == "kwargs"  # the store's rule, not the door's


@pytest.mark.parametrize(
    ("method", "body", "field", "expected"),
    [
        ("get_tasks", {"kwargs": {"ids": [1, "x"]}}, "ids[1]", "must be int"),
        ("search_tasks", {"kwargs": {"after_id": "x"}}, "after_id", "must be int"),
        ("search_tasks", {"kwargs": {"after_id": True}}, "after_id", "must be int"),
        ("get_task_type", {"args": [5]}, "name", "must be str"),
        ("get_task_runs", {"args": ["x"]}, "task_id", "must be int"),
        ("count_tasks", {"kwargs": {"criteria": 5}}, "criteria", "must be TaskFilter"),
        ("get_task_by_key", {"args": [{"a": 1}]}, "key", "must be str"),
    ],
)
def test_an_argument_of_the_wrong_type_is_a_422_naming_it(
    reader: httpx.Client, method: str, body: dict[str, Any], field: str, expected: str
) -> None:
    answer = reader.post(f"/rpc/{method}", json=body)
    assert answer.status_code == 422, answer.text
    [detail] = answer.json()["detail"]
    assert detail["loc"] == ["body", field]
    assert detail["msg"].startswith(expected)
    assert reader.post("/rpc/get_tasks", json={"kwargs": {"ids": [1, 2]}}).json() == {"result": []}


def _read_head(reader: httpx.Client, method: str, framing: bytes) -> bytes:
    return (
        b"POST /rpc/%s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n"
        b"Content-Type: application/json\r\n%s\r\n"
        % (method.encode(), reader.headers["Authorization"].encode(), framing)
    )


def _answer(sock: socket.socket) -> bytes:
    """One answer (head and body by its Content-Length), without waiting
    for the connection to end."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"content-length: (\d+)", head.lower())
    assert length is not None, head
    while len(body) < int(length.group(1)):
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_read_takes_a_plain_body_and_is_refused_before_reading_more(
    reader: httpx.Client, client: httpx.Client
) -> None:
    """A store read takes ids and a filter: its body is held to the plain
    2 MB limit, not the 256 MB of a write (an import is one call). A
    declared 10 MB is refused from the head alone; 10 MB streamed without
    a length is refused once past the limit, the rest never sent."""
    port = reader.base_url.port
    assert port is not None
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_read_head(reader, "get_tasks", b"Content-Length: 10000000\r\n"))
        assert _answer(sock).startswith(b"HTTP/1.1 413")  # nothing of the body sent
    megabyte = b"x" * 2**20
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_read_head(reader, "search_tasks", b"Transfer-Encoding: chunked\r\n"))
        for _ in range(3):  # of the ten
            sock.sendall(b"%x\r\n%s\r\n" % (len(megabyte), megabyte))
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"larger than 2000000 bytes" in answer
    # a write keeps its larger limit: read whole, then refused for what it says
    padded = client.post(
        "/rpc/create_tasks", json={"args": [[]], "padding": "x" * 10_000_000}, timeout=60
    )
    assert padded.status_code == 422, padded.text[:200]
    assert padded.json()["detail"][0]["loc"] == ["body", "padding"]


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "field", "cap"),
    [
        (
            "preview_bulk",
            [BulkAction.CANCEL, BulkFilter(type="sleep")],
            {"scan": 100_000},
            "scan",
            10_000,
        ),
        ("search_tasks", [], {"limit": 1_001}, "limit", 1_000),
        ("list_pending", ["sleep"], {"limit": 1_001}, "limit", 1_000),
        ("get_task_runs", [1], {"limit": 1_001}, "limit", 1_000),
        ("get_tasks", [list(range(1_001))], {}, "ids", 1_000),
        ("ready_task_ids", ["sleep"], {"limit": 10_001}, "limit", 10_000),
    ],
)
def test_a_read_past_rests_caps_is_a_422_naming_the_argument(
    reader: httpx.Client,
    now: datetime,
    method: str,
    args: list[Any],
    kwargs: dict[str, Any],
    field: str,
    cap: int,
) -> None:
    """/rpc reads are held to REST's caps: a page of whole rows to 1,000
    (GET /tasks), a scan or a list of ids to 10,000 (POST /tasks/bulk): a
    read-only token buys no more work over /rpc than over REST (a scan of
    100,000 tasks took 45 to 64 s)."""
    if method in ("preview_bulk", "list_pending", "ready_task_ids"):
        kwargs = {**kwargs, "now": now}
    body = {"args": wire.encode(args), "kwargs": wire.encode(kwargs)}
    answer = reader.post(f"/rpc/{method}", json=body)
    assert answer.status_code == 422, answer.text
    [detail] = answer.json()["detail"]
    assert detail["loc"] == ["body", "kwargs", field]
    assert detail["msg"].startswith(f"is at most {cap:,} per call") or detail["msg"].startswith(
        f"names at most {cap:,}"
    )


def test_the_remote_store_pages_what_the_caps_bound(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    """Through the remote store a caller asks as much as of a local store:
    the pages, chunks and windows within the server's caps are its own."""
    tasks = [
        Task(type="sleep", args=[n], next_run=now, deadline=now, schedule_kind=ScheduleKind.ONESHOT)
        for n in range(2_500)
    ]
    ids = [t.id for t in store.create_tasks(tasks, now=now)]
    criteria = BulkFilter(type="sleep")
    with remote(store) as client:
        assert [t.id for t in client.search_tasks(limit=2_500)] == ids
        assert [t.id for t in client.search_tasks(after_id=ids[9], limit=1_500)] == ids[10:1_510]
        assert [t.id for t in client.get_tasks(ids[::-1])] == ids[::-1]
        for scan in (20_000, 1_500):
            paged = client.preview_bulk(BulkAction.DISABLE, criteria, now=now, scan=scan)
            local = store.preview_bulk(BulkAction.DISABLE, criteria, now=now, scan=scan)
            assert (paged.matched, paged.sample, paged.next_after_id) == (
                local.matched,
                local.sample,
                local.next_after_id,
            )
        assert (
            client.preview_bulk(BulkAction.DISABLE, criteria, now=now, scan=1_500).matched == 1_500
        )
        # no cursor to page with: the server's refusal, naming the argument
        with pytest.raises(InvalidInput) as refused:
            client.list_pending("sleep", now=now, limit=1_001)
        assert refused.value.field == "kwargs.limit"
