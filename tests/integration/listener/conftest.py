"""Fixtures of the listener tests: a PostgreSQL store and a broker of each kind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from listenertest import broker

from swh_like_scheduler.store import SQLAlchemyStore


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("rabbitmq", marks=pytest.mark.rabbitmq),
    ]
)
def broker_url(request: pytest.FixtureRequest) -> str:
    return broker(request.param)


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore.from_url(postgres_url)
    yield store
    store.close()
