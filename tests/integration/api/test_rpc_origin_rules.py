"""The url the loader visits is the url the origin shows (issue 60), at the
``/rpc`` door, on SQLite and PostgreSQL: ``record_listed_origins`` with
loader arguments that set ``url`` is a 422 naming
``extra_loader_arguments.url``, an origin url of a scheme no loader visits
(``file:``, ``javascript:``, ``data:``) a 422 naming ``origins[n].url``;
nothing is written. Before, both were recorded, and the visit message sent
the loader to ``file:///etc/shadow`` while every face showed the listed
url."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
import pytest

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore, wire


@pytest.fixture
def lister_id(store: SQLAlchemyStore, now: datetime) -> str:
    store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
    lister = store.get_or_create_lister("gitlab", now=now)
    assert lister.id is not None
    return lister.id


def origin(lister_id: str, url: str, **fields: Any) -> dict[str, Any]:
    """A ``ListedOrigin`` as the wire writes it (built by hand: the client's
    own class refuses what this sends)."""
    return {
        wire.TYPE: "record",
        "class": "ListedOrigin",
        "fields": {"lister_id": lister_id, "url": url, "visit_type": "git", **fields},
    }


def record(client: httpx.Client, *origins: dict[str, Any]) -> httpx.Response:
    return client.post("/rpc/record_listed_origins", json={"kwargs": {"origins": list(origins)}})


def refusal(answer: httpx.Response) -> tuple[str, str]:
    """``(field, message)`` of a 422: refused reading the body (a list of
    details, each with its place), or by the store (the error itself)."""
    assert answer.status_code == 422, answer.text
    body = answer.json()
    if isinstance(body["detail"], list):
        [detail] = body["detail"]
        return ".".join(detail["loc"][1:]), detail["msg"]
    state = body["error"]["state"]
    return state["field"], state["message"]


def listed(store: SQLAlchemyStore) -> list[str]:
    return [o.url for o in store.get_listed_origins(enabled=None).origins]


def test_loader_arguments_cannot_set_the_url(
    client: httpx.Client, store: SQLAlchemyStore, lister_id: str
) -> None:
    good = origin(lister_id, "https://gitlab.com/a/b")
    bad = origin(
        lister_id,
        "https://gitlab.com/a/c",
        extra_loader_arguments={"branch": "main", "url": "file:///etc/shadow"},
    )
    field, message = refusal(record(client, good, bad))
    assert field == "extra_loader_arguments.url" and "set by the scheduler" in message
    assert listed(store) == []
    fine = origin(lister_id, "https://gitlab.com/a/c", extra_loader_arguments={"branch": "main"})
    assert record(client, good, fine).status_code == 200
    assert sorted(listed(store)) == ["https://gitlab.com/a/b", "https://gitlab.com/a/c"]


@pytest.mark.parametrize(
    ("field", "url"),
    [
        ("url", "file:///etc/shadow"),
        ("url", "javascript://%0aalert(document.cookie)"),
        ("url", "DATA://text/html;base64,PHNjcmlwdD4="),
        ("url", "vbscript://msgbox"),
        ("forked_from_url", "file:///etc/passwd"),
    ],
)
def test_an_origin_url_of_a_scheme_no_loader_visits_is_a_422(
    client: httpx.Client, store: SQLAlchemyStore, lister_id: str, field: str, url: str
) -> None:
    good = origin(lister_id, "https://gitlab.com/a/b")
    bad = (
        origin(lister_id, url)
        if field == "url"
        else origin(lister_id, "https://gitlab.com/a/fork", forked_from_url=url)
    )
    named, message = refusal(record(client, good, bad))
    assert named == f"origins[1].{field}" and "is not a scheme a loader visits" in message
    assert listed(store) == []


def test_the_schemes_loaders_visit_pass(
    client: httpx.Client, store: SQLAlchemyStore, lister_id: str
) -> None:
    urls = [
        "https://gitlab.com/a/b",
        "http://hg.example.org/repo",
        "git://git.kernel.org/pub/scm/git/git.git",
        "svn://svn.apache.org/repos/asf",
        "SVN+SSH://svn.example.org/repo",
        "deb://Debian/packages/hello",
    ]
    answer = record(client, *(origin(lister_id, url) for url in urls))
    assert answer.status_code == 200, answer.text
    assert sorted(listed(store)) == sorted(urls)
