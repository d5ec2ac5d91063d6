"""Shared fixtures: real databases for the store, isolated per test.

PostgreSQL: one template database migrated to head per session, cloned for
each test (``CREATE DATABASE … TEMPLATE``, one test ahead; dropped behind,
in the background: :class:`_Databases`). SQLite: one migrated file per
session, copied for each test. Services come from ``services.py``: an
environment URL, else the standard local port, else an embedded server;
unavailable → skip, or fail when ``CI`` is set.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import cpu_usage
import services

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore, make_engine, migrations
from swh_like_scheduler.worker.heartbeat import close_all

# The suite starts many Python processes (celery workers, daemons, the CLI),
# each importing this package, whose editable install pip compiled nothing
# of; and each pytest process rewrites the test modules' asserts. Where the
# environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE, set in some
# container images), each of them compiled it all again from source: about
# 0.25 CPU-s per daemon start, and collecting took a pytest process 15 CPU-s
# instead of 5 (measured with and without the __pycache__ folders). The suite's
# processes (xdist's too: they are started after this) write it to the
# __pycache__ folders (ignored by git), and read it back.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

_counter = itertools.count()


def pytest_configure(config: pytest.Config) -> None:
    cpu_usage.register(config)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        services.WORKER = int(worker[2:])


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"CI={'yes' if services.in_ci() else 'no'}"]


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name, resolve in services.RESOLVERS.items():
        if item.get_closest_marker(name):
            services.require(name, resolve)


def _worker_tag() -> str:
    return f"{os.getpid()}_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"


@pytest.fixture(autouse=True)
def _no_heartbeat_left() -> Iterator[None]:
    """Workers run in this process (``celery.contrib.testing``) leave the
    heartbeat of their runs behind: closed after each test, whose database
    is dropped."""
    yield
    close_all()


@pytest.fixture(scope="session")
def postgres_server() -> str:
    return services.require("postgresql", services.postgres_url)


@pytest.fixture(scope="session")
def postgres_template(postgres_server: str) -> Iterator[str]:
    name = f"swh_tmpl_{_worker_tag()}"
    url = services.create_empty_database(postgres_server, name)
    engine = make_engine(url)
    try:
        migrations.upgrade(engine)
    finally:
        engine.dispose()
    yield name
    services.drop_database(postgres_server, name)


class _Databases:
    """The tests' databases, cloned from the template one test ahead and
    dropped behind, each by a thread of its own, so that no test waits for
    either: a ``CREATE DATABASE … TEMPLATE`` copies the template, and each
    ``DROP DATABASE`` makes PostgreSQL checkpoint (0.1 to 1.3 s each under
    the suite's load, for some 700 databases). Each test still gets a fresh
    clone of the migrated template, whose commits do not wait for the disk
    (:func:`services.commit_without_flush`), and every clone is dropped
    before the template is."""

    def __init__(self, server: str, template: str) -> None:
        self.server, self.template = server, template
        self.creating = ThreadPoolExecutor(1, thread_name_prefix="clone-database")
        self.dropping = ThreadPoolExecutor(1, thread_name_prefix="drop-database")
        self.ahead: Future[tuple[str, str]] | None = None
        self.drops: list[Future[None]] = []

    def _clone(self) -> tuple[str, str]:
        name = f"swh_test_{_worker_tag()}_{next(_counter)}"
        url = services.create_database_from_template(self.server, self.template, name)
        services.commit_without_flush(self.server, name)
        return name, url

    def take(self) -> tuple[str, str]:
        """A fresh clone's name and URL (the next one is started meanwhile)."""
        ready = self.ahead or self.creating.submit(self._clone)
        self.ahead = self.creating.submit(self._clone)
        return ready.result()

    def drop(self, name: str) -> None:
        self.drops.append(self.dropping.submit(services.drop_database, self.server, name))

    def close(self) -> None:
        """Drops the clone made ahead; waits for every drop (an error is raised)."""
        self.creating.shutdown(wait=True)
        if self.ahead is not None and self.ahead.exception() is None:
            self.drop(self.ahead.result()[0])
        self.dropping.shutdown(wait=True)
        for dropped in self.drops:
            dropped.result()


@pytest.fixture(scope="session")
def _databases(postgres_server: str, postgres_template: str) -> Iterator[_Databases]:
    databases = _Databases(postgres_server, postgres_template)
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture
def postgres_url(_databases: _Databases) -> Iterator[str]:
    name, url = _databases.take()
    yield url
    _databases.drop(name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "template.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    try:
        migrations.upgrade(engine)
    finally:
        engine.dispose()
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    path = tmp_path / "scheduler.sqlite"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(
    params=[
        pytest.param("sqlite"),
        pytest.param("postgresql", marks=pytest.mark.postgresql),
    ]
)
def db_url(request: pytest.FixtureRequest) -> str:
    """A migrated, empty database of each supported kind."""
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("rabbitmq", marks=pytest.mark.rabbitmq),
    ]
)
def broker_url(request: pytest.FixtureRequest) -> str:
    """A real broker of each supported kind."""
    return services.redis_url() if request.param == "redis" else services.amqp_url()


@pytest.fixture
def store(db_url: str) -> Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore.from_url(db_url)
    yield store
    store.close()


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[SQLAlchemyStore]:
    """A store on a fresh PostgreSQL database (for what SQLite cannot do)."""
    store = SQLAlchemyStore.from_url(postgres_url)
    yield store
    store.close()


@pytest.fixture
def now() -> datetime:
    return datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def sleep_type(store: SQLAlchemyStore) -> TaskType:
    from datetime import timedelta

    return store.create_task_type(
        TaskType(
            type="sleep",
            backend_name="swh_like_workers.sleep.sleep",
            description="sleep a while",
            default_interval=timedelta(hours=1),
            min_interval=timedelta(minutes=10),
            max_interval=timedelta(days=1),
            backoff_factor=2.0,
            max_queue_length=1000,
        )
    )
