"""The ``store`` of the contract suites (this folder), local and remote: each test runs
against SQLite, PostgreSQL, PostgreSQL with the Redis index kept in line
(:class:`~swh_like_scheduler.index.IndexedStore`; after each test every
waiting task must be filed in the index as the database holds it), the
remote client (over a real HTTP server on a SQLite store), and the store
held in memory (:class:`~swh_like_scheduler.store.memory.MemoryStore`),
where a test that asks for a role it does not hold yet is skipped, naming
the method."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import services

from swh_like_scheduler.index import IndexedStore, RedisIndex, drift
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.memory import MemoryStore

sys.path.insert(0, str(Path(__file__).parents[1] / "api"))
from api_server import remote

KINDS = [
    pytest.param("sqlite"),
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("indexed", marks=[pytest.mark.postgresql, pytest.mark.redis]),
    pytest.param("remote"),
    pytest.param("memory"),
]


class Partial:
    """A memory store whose methods not written yet skip the test asking
    for them (the roles it does not hold), instead of failing it."""

    def __init__(self, store: MemoryStore) -> None:
        object.__setattr__(self, "_store", store)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._store, name, value)

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(self._store, name)
        except AttributeError:
            pytest.skip(f"the memory store does not hold {name} yet")


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield Partial(MemoryStore())
        return
    on_postgres = request.param in ("postgresql", "indexed")
    fixture = "postgres_url" if on_postgres else "sqlite_url"
    local = SQLAlchemyStore.from_url(str(request.getfixturevalue(fixture)))
    try:
        if request.param == "remote":
            with remote(local) as client:
                yield client
        elif request.param == "indexed":
            yield from _indexed(local)
        else:
            yield local
    finally:
        local.close()


def _indexed(local: SQLAlchemyStore) -> Iterator[Any]:
    """``local`` with a Redis index under a private prefix; afterwards, no
    waiting task may be missing from it or filed at other times."""
    client = redis.Redis.from_url(services.require("redis", services.redis_url))
    index = RedisIndex(client, prefix=f"swh-contract-{uuid.uuid4().hex[:8]}")
    try:
        indexed = IndexedStore(local, index)
        yield indexed
        for task_type in local.get_task_types():
            if task_type.type in indexed.invalidated:
                continue  # an import: the type's index is to be rebuilt
            after, missing, wrong = 0, 0, 0
            while (
                found := drift(index, local, task_type.type, after_id=after, only_complete=False)
            ).checked:
                missing, wrong, after = missing + found.missing, wrong + found.wrong, found.last_id
            assert (missing, wrong) == (0, 0), (
                f"index drift in {task_type.type}: {missing} missing, {wrong} wrong"
            )
    finally:
        keys = list(client.scan_iter(match=f"{{{index.prefix}:*"))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.fixture
def local_only(request: pytest.FixtureRequest) -> None:
    """Skip the remote store where the test hands the store a Python
    function (``apply``): a remote store applies the server's outcome
    policy only (:mod:`swh_like_scheduler.api.client`)."""
    if request.node.callspec.params.get("store") == "remote":
        pytest.skip("a function cannot be sent to a remote store (apply)")
