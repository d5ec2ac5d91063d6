"""Fixtures of the broker-layer tests: a Celery app per broker, unique queues.

Every queue a test asks for through ``make_queue`` is deleted afterwards,
with what the broker keeps beside it (kombu's Redis bindings and priority
lists; the direct exchange Celery declares with the same name on AMQP).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator

import pytest
import services
from brokertest import cleanup_queue, make_app
from celery import Celery


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("rabbitmq", marks=pytest.mark.rabbitmq),
    ]
)
def broker_url(request: pytest.FixtureRequest) -> str:
    """The URL of a running broker of each kind."""
    resolver = services.RESOLVERS[request.param]
    return services.require(request.param, resolver)


@pytest.fixture
def app(broker_url: str) -> Celery:
    return make_app(broker_url)


@pytest.fixture
def redis_app() -> Celery:
    """An app on Redis, for what only kombu's Redis transport does."""
    return make_app(services.require("redis", services.redis_url))


@contextlib.contextmanager
def _queues(app: Celery) -> Iterator[Callable[[], str]]:
    names: list[str] = []

    def make() -> str:
        name = f"swh-broker-test-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        names.append(name)
        return name

    try:
        yield make
    finally:
        for name in names:
            cleanup_queue(app, name)


@pytest.fixture
def make_queue(app: Celery) -> Iterator[Callable[[], str]]:
    """``make_queue()`` → a queue name no other test (or run) uses."""
    with _queues(app) as make:
        yield make


@pytest.fixture
def make_redis_queue(redis_app: Celery) -> Iterator[Callable[[], str]]:
    """``make_queue`` for :func:`redis_app`."""
    with _queues(redis_app) as make:
        yield make
