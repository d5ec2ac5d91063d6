"""A worker whose Redis broker shuts down under bodies in flight keeps
running, reconnects and takes new tasks; no unacknowledged message is
dropped on the way.

The shape that killed workers (issue 58, "kombu's crash"): late acks (the
platform's setting) so the bodies under way hold their messages, a free
slot so a ``BRPOP`` waits on the task channel, a control channel beside it,
and Redis gone. Celery's consumer tears the connection down, kombu leaves
the task channel half closed and detached from its connection, and its
second close gave the messages back through that missing connection:
``AttributeError: 'NoneType' object has no attribute 'hostname'`` in
``restore_unacked``, "Unrecoverable error", the worker exits (code 1) once
its bodies end. :mod:`swh_like_scheduler.plumbing.kombu_redis` explains the
sequence and the patch every app built by ``make_app`` gets.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from pathlib import Path

import pytest
import redis
from conftest import TABLE
from harness import Platform
from kombu import Consumer, Exchange, Producer, Queue
from kombu.common import ignore_errors
from kombu.message import Message
from private import PrivateRedis

from swh_like_scheduler.plumbing.celery_factory import make_app

pytestmark = [pytest.mark.faults]

#: what kombu's crash looked like in the worker's log
CRASH = "Unrecoverable error"
#: what the worker logs when it reaches the channel kombu detached
DETACHED = "on a channel kombu had already detached"


def logged(logs: Path, name: str, text: str) -> bool:
    path = logs / f"{name}.log"
    return path.exists() and text in path.read_text(errors="replace")


def shutdown(server: PrivateRedis, *, save: bool) -> None:
    """``SHUTDOWN [NO]SAVE``, then the process reaped."""
    with contextlib.suppress(redis.ConnectionError):  # SHUTDOWN closes the connection
        client = redis.Redis.from_url(server.url)
        client.shutdown(save=save, nosave=not save)
    server.kill()  # gone already: reap it


def test_a_channel_kombu_detached_closes_as_a_lost_connection_and_keeps_its_messages(
    private_redis: PrivateRedis,
) -> None:
    """The consumer's teardown, step by step on a real server: the close
    that raised ``AttributeError`` now ends as a lost connection does, and
    the two messages held stay in Redis's unacked set, to be acked or given
    back, once Redis is back with its data."""
    app = make_app(config_module=None, broker_url=private_redis.url, load_workers=False)
    name = f"swh-fault-lost-{time.monotonic_ns()}"
    tasks = Queue(name, Exchange(name, "direct"), routing_key=name)
    with app.connection_for_write() as publishing:
        producer = Producer(publishing)
        for n in range(2):
            producer.publish({"n": n}, exchange=tasks.exchange, routing_key=name, declare=[tasks])
    connection = app.connection_for_read()
    connection.ensure_connection(max_retries=3)
    held: list[Message] = []
    Consumer(
        connection.default_channel,
        [tasks],
        callbacks=[lambda _body, message: held.append(message)],
        prefetch_count=4,
    ).consume()
    # a control channel beside it, as the worker's: closing it needs the server
    control = Queue(f"{name}.control", Exchange(f"{name}.fanout", "fanout"), auto_delete=True)
    Consumer(connection.channel(), [control], callbacks=[], no_ack=True).consume()
    deadline = time.monotonic() + 10
    while len(held) < 2 and time.monotonic() < deadline:
        with contextlib.suppress(socket.timeout):
            connection.drain_events(timeout=0.5)
    with contextlib.suppress(socket.timeout):  # room for more: a BRPOP waits
        connection.drain_events(timeout=0.3)
    assert len(held) == 2
    assert connection.default_channel._in_poll, "no BRPOP waiting: not the crash's shape"

    shutdown(private_redis, save=True)  # its data kept, for the second half
    # what Celery's consumer does when the connection is lost
    with pytest.raises(redis.ConnectionError):
        connection.drain_events(timeout=2)
    with contextlib.suppress(Exception):
        connection.collect(socket_timeout=1.0)
    ignore_errors(connection, connection.close)  # raised AttributeError before the patch

    private_redis.start()
    server = redis.Redis.from_url(private_redis.url)
    assert server.hlen("unacked") == 2, "the held messages are not in Redis's unacked set"
    held[0].ack()  # a body that ends after the loss is acked, on the server
    assert server.hkeys("unacked") == [held[1].delivery_tag.encode()]
    # the other one comes back to its queue once older than the visibility timeout
    with app.connection_for_read(transport_options={"visibility_timeout": 0}) as again:
        again.default_channel.qos.restore_visible(num=10, interval=1)
    assert server.hlen("unacked") == 0
    assert server.llen(name) == 1, "the message held was not given back to its queue"


@pytest.mark.postgresql
@pytest.mark.redis
@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_worker_keeps_running_when_its_redis_shuts_down_under_its_bodies(
    postgres_url: str, private_redis: PrivateRedis, counter_url: str, logs: Path, pool: str
) -> None:
    """``celery -A swh_like_scheduler.celery_app worker`` (the shipped
    settings), one Redis as broker and result backend: 2 bodies of 8 s on
    4 slots when Redis shuts down (NOSAVE) for 4 s. The worker stays up,
    the 2 bodies complete once, and the tasks created after Redis is back
    run on the same worker process; none lost, none twice, counted by the
    bodies themselves."""
    running = Platform(
        postgres_url, private_redis.url, counter_url, logs, result_backend=private_redis.url
    )
    try:
        running.create_tasks(2, duration=8.0)
        running.listener()
        running.runner()
        worker = running.launch(
            "worker",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "swh_like_scheduler.celery_app",
                "worker",
                "-I",
                "platformprobe",
                "-P",
                pool,
                "-c",
                "4",
                "-Q",
                running.queue,
                "-n",
                f"worker-{running.prefix}@%h",
                "-E",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "INFO",
            ],
            env={**running.environment(), "SWH_SCHEDULER_LEASE_PING": "1"},
        )
        running.wait_for(lambda: running.starts() >= 2, 90, "the 2 bodies under way")
        time.sleep(0.5)  # the free slots' BRPOP waits
        shutdown(private_redis, save=False)
        time.sleep(4.0)
        private_redis.start()
        fault_ended = time.monotonic()
        running.wait_for(lambda: len(running.completions()) >= 2, 60, "the 2 bodies to end")
        time.sleep(2.0)  # before the patch, the worker exited once its bodies ended
        assert worker.poll() is None, (
            f"the worker exited (code {worker.poll()}) after Redis shut down; "
            f"kombu's crash logged: {logged(logs, 'worker', CRASH)}"
        )
        running.create_tasks(4, duration=0.5)  # taken by the same worker once Redis is back
        row = running.outcome(
            f"Redis broker and result backend shut down (NOSAVE) under 2 late-acked bodies, "
            f"{pool} worker",
            since=fault_ended,
            timeout=150,
        )
        TABLE.append(row.to_json())
        assert (row.lost, row.doubled) == (0, 0), row
        assert row.recorded == row.tasks == 6, row
        assert worker.poll() is None, "the worker exited"
        assert not logged(logs, "worker", CRASH)
        # the scenario took the path of the crash
        assert logged(logs, "worker", DETACHED), "the worker never met kombu's detached channel"
    finally:
        running.close()
