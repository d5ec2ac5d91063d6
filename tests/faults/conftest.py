"""The fault suite: private servers it may restart and empty, and its table.

A quick cut runs with the rest of the suite; ``SWH_FAULTS=full`` runs every
scenario, with more tasks. Every scenario adds a row to a table printed at
the end of the run as JSON (and written to ``$SWH_FAULTS_TABLE`` if set).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import services
from private import PrivatePostgres, PrivateRabbitMQ, PrivateRedis, PrivateServer

from swh_like_scheduler.store import make_engine, migrations

FULL = os.environ.get("SWH_FAULTS", "").lower() == "full"
TABLE: list[dict[str, Any]] = []


def scale(quick: int, full: int) -> int:
    """A scenario's number of tasks in the quick cut and the full suite."""
    return full if FULL else quick


def full_only() -> pytest.MarkDecorator:
    return pytest.mark.skipif(not FULL, reason="full fault suite only (SWH_FAULTS=full)")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TABLE:
        return
    text = json.dumps(TABLE, indent=1)
    terminalreporter.write_sep("=", "fault table")
    terminalreporter.write_line(text)
    target = os.environ.get("SWH_FAULTS_TABLE")
    if target:
        Path(target).write_text(text + "\n")


def _private(server: PrivateServer) -> Iterator[Any]:
    try:
        server.start()
    except services.ServiceUnavailable as error:
        server.close()
        if services.in_ci():
            pytest.fail(str(error))
        pytest.skip(str(error))
    yield server
    server.close()


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    yield from _private(PrivateRedis())


@pytest.fixture
def private_rabbitmq() -> Iterator[PrivateRabbitMQ]:
    yield from _private(PrivateRabbitMQ())


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    for _ in _private(server):
        engine = make_engine(server.url)
        try:
            migrations.upgrade(engine)
        finally:
            engine.dispose()
        yield server


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """Where a scenario's processes write their logs."""
    return tmp_path


@pytest.fixture
def counter_url() -> str:
    """Where the probe tasks count (a Redis no scenario breaks)."""
    return services.require("redis", services.redis_url)
