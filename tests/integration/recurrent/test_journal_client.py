"""``journal-client`` on recorded journal messages (the Kafka client is
exercised for real where it can run without a broker, and against Tansu in
test_journal_tansu.py; the messages' handling on recorded values), against the
real store on SQLite and PostgreSQL: both date encodings, unreadable
messages skipped and counted, a batch applied twice changes nothing, a
database failure rewinds the consumer to the batch."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack
import pytest
from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.exceptions import InvalidInput, StoreUnavailable
from swh_like_scheduler.recurrent.journal import journal_step, kafka_consumer, read_batch
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import LastVisitStatus

T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
TOPIC = "swh.journal.objects.origin_visit_status"
SNAP = bytes(range(20))


def value(url: str, at: datetime, status: str, snapshot: bytes | None, *, old: bool) -> bytes:
    """A journal value as the archive's producers write it: dates as msgpack
    timestamps, or (older producers) as ``__datetime__`` maps."""
    date: Any = {"__datetime__": True, "s": at.isoformat()} if old else at
    body = {
        "origin": url,
        "visit": 3,
        "date": date,
        "type": "git",
        "status": status,
        "snapshot": snapshot,
        "metadata": None,
        "a_field_from_a_newer_producer": 1,
    }
    return msgpack.packb(body, use_bin_type=True, datetime=True)


@dataclass
class Recorded:
    """A recorded partition played back as confluent-kafka's consumer would."""

    values: list[bytes | None]
    position: int = 0
    committed: int = 0
    seeks: list[tuple[str, int, int]] = field(default_factory=list)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        batch = self.values[self.position : self.position + num_messages]
        messages = [Message(v, self.position + n) for n, v in enumerate(batch)]
        self.position += len(batch)
        return messages

    def commit(self, *args: Any, **kwargs: Any) -> None:
        self.committed = self.position

    def seek(self, partition: Any) -> None:
        self.seeks.append((partition.topic, partition.partition, partition.offset))
        self.position = partition.offset

    def close(self) -> None:
        pass


@dataclass
class Message:
    data: bytes | None
    at: int

    def error(self) -> None:
        return None

    def value(self) -> bytes | None:
        return self.data

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.at


def stream() -> list[bytes | None]:
    a, b = "https://forge.example/a", "https://forge.example/b"
    return [
        value(a, T0, "created", None, old=False),
        value(a, T0 + timedelta(minutes=5), "full", SNAP, old=False),
        value(b, T0, "not_found", None, old=True),
        b"\xc1 not msgpack",
        None,  # a tombstone
        value(b, T0 + timedelta(hours=1), "exploded", None, old=False),
        msgpack.packb(
            {"origin": a, "type": "git", "date": "2026-11-20T10:00:00", "status": "full"}
        ),
    ]


def test_a_recorded_batch_is_applied_once_and_the_unreadable_skipped(
    store: SQLAlchemyStore, caplog: pytest.LogCaptureFixture
) -> None:
    # (a test before it in this process may have raised the loggers' level)
    caplog.set_level(logging.WARNING, logger="swh_like_scheduler.recurrent.journal")
    consumer = Recorded(stream())
    done = journal_step(store, consumer, batch=100)
    assert (done.received, done.changed, done.ignored, done.unreadable) == (7, 2, 1, 4)
    assert consumer.committed == 7
    a, b = store.origin_visit_stats_get(
        [("https://forge.example/a", "git"), ("https://forge.example/b", "git")]
    )
    assert a.last_visit_status is LastVisitStatus.SUCCESSFUL and a.last_snapshot == SNAP.hex()
    assert a.last_visit == T0 + timedelta(minutes=5)
    assert b.last_visit_status is LastVisitStatus.NOT_FOUND and b.last_visit == T0
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 4 and all(f"{TOPIC}[0]@" in m for m in skipped)
    assert any("@6" in m and "no zone" in m for m in skipped)
    again = journal_step(store, Recorded(stream()), batch=100)  # re-delivered after a crash
    assert (again.changed, again.ignored) == (0, 3)
    assert store.origin_visit_stats_get([("https://forge.example/a", "git")]) == [a]


def test_a_database_failure_rewinds_to_the_batch(store: SQLAlchemyStore) -> None:
    consumer = Recorded(stream())
    consumer.consume(2)  # two messages read and committed before
    consumer.commit()
    broken = Broken(store)
    with pytest.raises(StoreUnavailable):
        journal_step(broken, consumer, batch=3)  # type: ignore[arg-type]
    assert consumer.seeks == [(TOPIC, 0, 2)] and consumer.committed == 2
    done = journal_step(store, consumer, batch=100)  # the same messages again
    assert done.received == 5 and consumer.committed == 7


@dataclass
class Broken:
    store: SQLAlchemyStore

    def record_visit_statuses(self, messages: Any) -> Any:
        raise StoreUnavailable("the database went away")


def test_read_batch_names_each_refusal() -> None:
    statuses, unreadable = read_batch([Message(v, n) for n, v in enumerate(stream())])
    assert unreadable == 4
    assert [s.status.value for s in statuses] == ["created", "full", "not_found"]


def test_the_real_kafka_client_without_a_broker_waits_and_returns_nothing(
    store: SQLAlchemyStore,
) -> None:
    consumer = kafka_consumer(
        ["127.0.0.1:1"], settings={"socket.connection.setup.timeout.ms": "1000"}
    )
    try:
        assert journal_step(store, consumer, timeout=0.5).received == 0
    finally:
        consumer.close()
    with pytest.raises(InvalidInput) as refused:
        kafka_consumer(["127.0.0.1:1"], settings={"no.such.setting": "1"})
    assert refused.value.field == "consumer-setting"


def test_the_command_refuses_a_bad_setting_and_an_unreachable_kafka(db_url: str) -> None:
    runner = CliRunner()
    base = ["scheduler", "--db-url", db_url, "journal-client", "--broker", "127.0.0.1:1"]
    bad = runner.invoke(swh, [*base, "--consumer-setting", "nonsense"])
    assert bad.exit_code == 2 and "consumer-setting" in bad.stderr
    # nothing listens on 127.0.0.1:1: --once fails instead of reporting nothing received
    once = runner.invoke(swh, [*base, "--once", "--wait", "0.5", "--json"])
    assert once.exit_code == 1, once.output + once.stderr
    assert "error: journal-client: cannot reach Kafka at 127.0.0.1:1: " in once.stderr
    assert '"received"' not in once.output


@dataclass
class FailingCommits(Recorded):
    """A partition whose first ``failures`` commits fail as confluent-kafka's
    do when the group coordinator is gone (a ``KafkaException``)."""

    failures: int = 1

    def commit(self, *args: Any, **kwargs: Any) -> None:
        from confluent_kafka import KafkaError, KafkaException

        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "coordinator gone"))
        super().commit()


def test_a_failed_commit_is_logged_and_the_next_one_covers_the_batch(
    store: SQLAlchemyStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="swh_like_scheduler.recurrent.journal")
    consumer = FailingCommits(stream())
    first = journal_step(store, consumer, batch=3)
    assert (first.received, first.uncommitted) == (3, 3) and consumer.committed == 0
    assert any(
        "committing the offsets of 3 messages failed" in r.getMessage() for r in caplog.records
    )
    # the statuses were applied all the same
    [a] = store.origin_visit_stats_get([("https://forge.example/a", "git")])
    assert a.last_visit is not None
    second = journal_step(store, consumer, batch=100)
    assert second.uncommitted == 0 and consumer.committed == 7
    # read again from the last committed offset (a restart): nothing changes
    again = journal_step(store, Recorded(stream()), batch=100)
    assert again.changed == 0


def test_nothing_to_commit_is_no_failure(store: SQLAlchemyStore) -> None:
    from confluent_kafka import KafkaError, KafkaException

    class NoOffset(Recorded):
        def commit(self, *args: Any, **kwargs: Any) -> None:
            raise KafkaException(KafkaError(KafkaError._NO_OFFSET))

    done = journal_step(store, NoOffset(stream()), batch=2)
    assert done.received == 2 and done.uncommitted == 0


def test_a_batch_the_client_cannot_read_is_an_outage_the_daemon_waits_out(
    store: SQLAlchemyStore,
) -> None:
    from confluent_kafka import KafkaError, KafkaException

    from swh_like_scheduler.domain.exceptions import SchedulerError
    from swh_like_scheduler.recurrent.journal import JournalUnavailable

    class Unreadable(Recorded):
        def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
            raise KafkaException(KafkaError(KafkaError._FATAL, "fenced"))

    with pytest.raises(JournalUnavailable, match="reading a batch failed") as raised:
        journal_step(store, Unreadable(stream()), batch=2)
    assert isinstance(raised.value, SchedulerError)  # the daemon's loop waits and retries
    assert store.origin_visit_stats_get([("https://forge.example/a", "git")]) == []
