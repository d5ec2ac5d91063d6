"""kombu's Redis channel once its connection is gone
(:mod:`swh_like_scheduler.plumbing.kombu_redis`): the parameters it last
built a pool from, or a connection error, never ``AttributeError``. The
crash itself, on real servers: ``tests/faults/test_broker_lost.py``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kombu import Connection
from kombu.transport import redis as transport

from swh_like_scheduler.plumbing import kombu_redis
from swh_like_scheduler.plumbing.celery_factory import make_app


def channel(cls: Any = transport.Channel) -> Any:
    """A channel of a transport that never connected (none is needed to
    build connection parameters)."""
    made = object.__new__(cls)
    made.connection = Connection("redis://127.0.0.1:6399/3").transport
    return made


def test_every_app_made_installs_it_once() -> None:
    make_app(config_module=None, load_workers=False)
    assert getattr(transport.Channel._connparams, "_swh_detached_check", False)
    assert kombu_redis.install() is False  # already there


def test_a_channel_with_its_connection_is_unchanged() -> None:
    kombu_redis.install()
    live = channel()
    params = live._connparams()
    assert (params["host"], params["port"], params["db"]) == ("127.0.0.1", 6399, 3)
    asynchronous = live._connparams(asynchronous=True)
    assert asynchronous["connection_class"] is not params["connection_class"]


def test_a_detached_channel_reuses_its_last_parameters(caplog: pytest.LogCaptureFixture) -> None:
    kombu_redis.install()
    detached = channel()
    built = detached._connparams()
    detached.connection.client = None  # what Connection.collect() does to the transport
    with caplog.at_level(logging.WARNING, kombu_redis.__name__):
        again = detached._connparams()
        detached._connparams()
    assert again == built and again is not built
    said = [r.getMessage() for r in caplog.records if r.name == kombu_redis.__name__]
    assert len(said) == 1, said  # once per channel
    assert "last connection settings" in said[0]
    detached.connection = None  # what closing the channel does
    assert detached._connparams() == built


@pytest.mark.parametrize("why", ["never built", "asynchronous", "sentinel"])
def test_a_detached_channel_without_parameters_is_a_lost_connection(why: str) -> None:
    kombu_redis.install()
    detached = channel(transport.SentinelChannel if why == "sentinel" else transport.Channel)
    if why != "never built":
        detached._connparams()
    detached.connection.client = None
    with pytest.raises(kombu_redis.ChannelDetached) as raised:
        detached._connparams(asynchronous=why == "asynchronous")
    # what kombu and Celery catch as "connection lost"
    assert isinstance(raised.value, transport.Transport.connection_errors)
