"""Fixtures of the listener tests: a PostgreSQL store and a broker of each kind."""

from __future__ import annotations

import pytest
from listenertest import broker


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("rabbitmq", marks=pytest.mark.rabbitmq),
    ]
)
def broker_url(request: pytest.FixtureRequest) -> str:
    return broker(request.param)
