"""An unreachable broker fails fast, with errors that say what happened."""

from __future__ import annotations

import time
import uuid

import pytest
from brokertest import make_app

from swh_like_scheduler.broker import (
    Message,
    PublishError,
    QueueDepthError,
    publish_batch,
    queue_depth,
    queue_depths,
)

DOWN = [
    pytest.param("redis://127.0.0.1:1/0", id="redis"),
    pytest.param("amqp://guest:guest@127.0.0.1:1//", id="rabbitmq"),
]


@pytest.mark.parametrize("url", DOWN)
def test_publishing_to_a_broker_that_is_down_raises_publish_error(url: str) -> None:
    app = make_app(url)
    messages = [Message(str(uuid.uuid4()), "t.x", "q", (i,)) for i in range(10)]
    started = time.monotonic()
    with pytest.raises(PublishError) as info:
        publish_batch(app, messages)
    assert time.monotonic() - started < 5
    error = info.value
    assert (error.published, error.total) == (0, 10)
    assert "127.0.0.1:1" in str(error)
    assert "re-published" in str(error)
    assert "guest:guest" not in str(error)


@pytest.mark.parametrize("url", DOWN)
def test_reading_depths_from_a_broker_that_is_down_raises(url: str) -> None:
    app = make_app(url)
    started = time.monotonic()
    with pytest.raises(QueueDepthError, match=r"depth of queue 'q'.*127\.0\.0\.1:1"):
        queue_depth(app, "q")
    with pytest.raises(QueueDepthError):
        queue_depths(app, ["q", "r"])
    assert time.monotonic() - started < 10


@pytest.mark.redis
def test_an_unknown_queue_is_refused_when_missing_queues_are_not_created() -> None:
    import services

    app = make_app(services.redis_url())
    app.conf.task_create_missing_queues = False
    with pytest.raises(PublishError, match="not in task_queues"):
        publish_batch(app, [Message("id-1", "t.x", "swh-broker-test-undeclared")])
