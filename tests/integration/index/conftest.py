"""The Redis index's fixture: an index under a prefix of its own, taken
out of the test Redis afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
import services

from swh_like_scheduler.index import RedisIndex


@pytest.fixture
def index() -> Iterator[RedisIndex]:
    client = redis.Redis.from_url(services.require("redis", services.redis_url))
    prefix = f"swh-test-index-{uuid.uuid4().hex[:8]}"
    yield RedisIndex(client, prefix=prefix)
    keys = list(client.scan_iter(match=f"{{{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()
