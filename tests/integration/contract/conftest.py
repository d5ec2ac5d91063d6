"""The ``store`` of the contract suites (this folder), local and remote: each test runs
against SQLite, PostgreSQL, and the remote client (over a real HTTP server
on a SQLite store)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swh_like_scheduler.store import SQLAlchemyStore

sys.path.insert(0, str(Path(__file__).parents[1] / "api"))
from api_server import remote

KINDS = [
    pytest.param("sqlite"),
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("remote"),
]


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    fixture = "postgres_url" if request.param == "postgresql" else "sqlite_url"
    local = SQLAlchemyStore.from_url(str(request.getfixturevalue(fixture)))
    try:
        if request.param == "remote":
            with remote(local) as client:
                yield client
        else:
            yield local
    finally:
        local.close()


@pytest.fixture
def local_only(request: pytest.FixtureRequest) -> None:
    """Skip the remote store where the test hands the store a Python
    function (``apply``): a remote store applies the server's outcome
    policy only (:mod:`swh_like_scheduler.client`)."""
    if request.node.callspec.params.get("store") == "remote":
        pytest.skip("a function cannot be sent to a remote store (apply)")
