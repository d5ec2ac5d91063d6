"""``journal-client``: no single message stops it. Each message below is
real msgpack bytes as the archive's Kafka topic would deliver them, fed
through :func:`journal_step` (what the consumer loop calls per batch) on
the real store (SQLite and PostgreSQL) between two good messages: each bad
one is logged with its topic, partition and offset and skipped, the good
ones are applied, and the whole batch's offsets are committed."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack
import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput, StoreUnavailable
from swh_like_scheduler.recurrent.journal import journal_step
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import LastVisitStatus

TOPIC = "swh.journal.objects.origin_visit_status"
PARTITION = 3
FIRST_OFFSET = 1_000
T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
SNAP = bytes(range(20))
A, B = "https://forge.example/a", "https://forge.example/b"


def good(url: str, **fields: Any) -> dict[str, Any]:
    return {"origin": url, "visit": 1, "date": T0, "type": "git", "status": "failed", **fields}


def packed(body: Any) -> bytes:
    return msgpack.packb(body, use_bin_type=True, datetime=True)


def timestamp96(seconds: int, nanoseconds: int = 0) -> bytes:
    """A msgpack timestamp extension (type -1, 96-bit form) written by hand,
    so that values no encoder would produce can be given."""
    return b"\xc7\x0c\xff" + struct.pack(">Iq", nanoseconds, seconds)


def with_raw_date(raw_date: bytes) -> bytes:
    """A good message whose ``date`` is the given msgpack bytes."""
    rest = {k: v for k, v in good(B).items() if k != "date"}
    return (
        b"\x85"
        + packed("date")
        + raw_date
        + b"".join(packed(k) + packed(v) for k, v in rest.items())
    )


def without(name: str) -> bytes:
    return packed({k: v for k, v in good(B).items() if k != name})


#: (what it is, its bytes, a word its log line must hold)
POISON: list[tuple[str, bytes | None, str]] = [
    # msgpack's own decoder turns this into an OverflowError (past 9999-12-31)
    ("a date past year 9999", with_raw_date(timestamp96(300_000_000_000)), "date"),
    ("a date before year 1", with_raw_date(timestamp96(-70_000_000_000)), "date"),
    (
        "a date the store refuses (year 9500)",
        packed(good(B, date=datetime(9500, 1, 1, tzinfo=UTC))),
        "date",
    ),
    ("nanoseconds past a second", with_raw_date(timestamp96(0, 2**31)), "value"),
    ("a timestamp of 3 bytes", with_raw_date(b"\xc7\x03\xff\x00\x01\x02"), "value"),
    (
        "an old-style date that is no date",
        packed(good(B, date={"__datetime__": True, "s": "soon"})),
        "date",
    ),
    ("a date as a huge integer", packed(good(B, date=2**64 - 1)), "date"),
    ("an origin that is a number", packed(good(B, origin=5)), "origin"),
    ("an origin that is a map", packed(good(B, origin={"url": B})), "origin"),
    ("a status that is a list", packed(good(B, status=["full"])), "status"),
    ("a snapshot that is a huge integer", packed(good(B, snapshot=2**64 - 1)), "snapshot"),
    ("no origin", without("origin"), "origin"),
    ("no date", without("date"), "date"),
    ("no visit type", without("type"), "visit_type"),
    ("10,000 nested lists", b"\x91" * 10_000 + b"\xc0", "nested deeper"),
    ("10,000 nested maps", b"\x81\xa1k" * 10_000 + b"\xc0", "nested deeper"),
    ("a huge integer for the whole value", b"\xcf" + b"\xff" * 8, "value"),
    ("a map as a map's key", b"\x81\x80\x01", "value"),
    ("text that is not UTF-8", b"\x81\xa6origin\xa2\xff\xfe", "value"),
    ("cut short", packed(good(B))[:-4], "value"),
    ("not msgpack", b"\xc1 nothing", "value"),
    ("a tombstone", None, "value"),
]


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
        return PARTITION

    def offset(self) -> int:
        return self.at


@dataclass
class Partition:
    """One partition played back as confluent-kafka's consumer hands it over."""

    values: list[bytes | None]
    position: int = FIRST_OFFSET
    committed: int = FIRST_OFFSET
    seeks: list[int] = field(default_factory=list)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        start = self.position - FIRST_OFFSET
        batch = self.values[start : start + num_messages]
        self.position += len(batch)
        return [Message(v, self.position - len(batch) + n) for n, v in enumerate(batch)]

    def commit(self, *args: Any, **kwargs: Any) -> None:
        self.committed = self.position

    def seek(self, partition: Any) -> None:
        self.seeks.append(partition.offset)
        self.position = partition.offset

    def close(self) -> None:
        pass


def where(offset: int) -> str:
    return f"{TOPIC}[{PARTITION}]@{offset}"


def skipped(caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    return {
        r.getMessage().split(" ")[1]: r.getMessage()
        for r in caplog.records
        if "skipped" in r.getMessage()
    }


def test_each_bad_message_is_skipped_and_the_rest_applied_and_committed(
    store: SQLAlchemyStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="swh_like_scheduler.recurrent.journal")
    values = [
        packed(good(A, status="full", snapshot=SNAP)),
        *(data for _, data, _ in POISON),
        packed(good(B, date=T0 + timedelta(hours=1))),
    ]
    consumer = Partition(values)
    done = journal_step(store, consumer, batch=len(values))
    assert (done.received, done.changed, done.unreadable) == (len(values), 2, len(POISON))
    assert consumer.committed == FIRST_OFFSET + len(values) and consumer.seeks == []
    a, b = store.origin_visit_stats_get([(A, "git"), (B, "git")])
    assert a.last_visit_status is LastVisitStatus.SUCCESSFUL and a.last_snapshot == SNAP.hex()
    assert b.last_visit_status is LastVisitStatus.FAILED
    assert b.last_visit == T0 + timedelta(hours=1)
    logged = skipped(caplog)
    for n, (what, _, word) in enumerate(POISON, start=1):
        line = logged.get(where(FIRST_OFFSET + n))
        assert line is not None, f"{what}: not logged ({sorted(logged)})"
        assert word in line, f"{what}: {line}"
    # the next step reads on from the committed offset: nothing comes again
    assert journal_step(store, consumer, batch=10).received == 0


@pytest.mark.parametrize(("what", "data", "word"), POISON, ids=[p[0] for p in POISON])
def test_a_batch_of_one_bad_message_is_committed(
    sqlite_url: str, what: str, data: bytes | None, word: str
) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    try:
        consumer = Partition([data])
        done = journal_step(store, consumer, batch=5)
        assert (done.received, done.changed, done.unreadable) == (1, 0, 1)
        assert consumer.committed == FIRST_OFFSET + 1
    finally:
        store.close()


@dataclass
class Refusing:
    """The real store, refusing (as a value) any batch that holds ``url``,
    and failing (an outage) on ``down`` alone."""

    store: SQLAlchemyStore
    url: str
    down: str | None = None
    calls: int = 0

    def record_visit_statuses(self, statuses: Any) -> Any:
        self.calls += 1
        origins = [s.origin for s in statuses]
        if origins == [self.down]:
            raise StoreUnavailable("the database went away")
        if self.url in origins:
            raise InvalidInput("origin", f"{self.url} refused by the database")
        return self.store.record_visit_statuses(statuses)


def test_a_status_the_store_refuses_is_skipped_and_the_others_applied(
    store: SQLAlchemyStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="swh_like_scheduler.recurrent.journal")
    refused = "https://forge.example/refused"
    consumer = Partition(
        [
            packed(good(A, status="full", snapshot=SNAP, date=T0 + timedelta(hours=2))),
            packed(good(refused)),
            packed(good(A, date=T0)),  # older than the first: applied first, as a batch would
            packed(good(B)),
        ]
    )
    refusing = Refusing(store, refused)
    done = journal_step(refusing, consumer, batch=10)  # type: ignore[arg-type]
    assert (done.received, done.changed, done.ignored, done.unreadable) == (4, 3, 0, 1)
    assert refusing.calls == 1 + 4 and consumer.committed == FIRST_OFFSET + 4
    a, b = store.origin_visit_stats_get([(A, "git"), (B, "git")])
    assert a.last_visit_status is LastVisitStatus.SUCCESSFUL and a.last_visit == T0 + timedelta(
        hours=2
    )
    assert b.last_visit_status is LastVisitStatus.FAILED
    assert store.origin_visit_stats_get([(refused, "git")]) == []
    assert where(FIRST_OFFSET + 1) in skipped(caplog)


def test_an_outage_while_applying_one_at_a_time_rewinds(store: SQLAlchemyStore) -> None:
    refused, down = "https://forge.example/refused", "https://forge.example/down"
    consumer = Partition([packed(good(A)), packed(good(refused)), packed(good(down))])
    with pytest.raises(StoreUnavailable):
        journal_step(Refusing(store, refused, down), consumer)  # type: ignore[arg-type]
    assert consumer.seeks == [FIRST_OFFSET] and consumer.committed == FIRST_OFFSET
    # once the database is back, the batch comes again: the status applied
    # before the outage changes nothing the second time
    done = journal_step(Refusing(store, refused), consumer)  # type: ignore[arg-type]
    assert (done.received, done.changed, done.ignored, done.unreadable) == (3, 1, 1, 1)
    assert consumer.committed == FIRST_OFFSET + 3
