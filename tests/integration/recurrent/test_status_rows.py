"""Visit statuses that change nothing write nothing (issue 59), on SQLite and
PostgreSQL, counted in the table itself: ``created`` and ``ongoing`` make no
``origin_visit_stats`` row and leave a listed origin's row as it was (on
PostgreSQL: the row's version, ``xmin``, unmoved: not even a lock was
taken); a repeated or older status changes nothing; a finished status of an
origin no lister listed makes its row, as the reference's journal client
does, and a later listing keeps what its visits found. Through the store,
the journal client (``journal_step``) and the listener's feed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack
import sqlalchemy as sa

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.recurrent.events import VisitFeed
from swh_like_scheduler.recurrent.journal import journal_step
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.sql_visit_stats import STATS
from swh_like_scheduler.store.tables import origin_visit_stats as stats_t
from swh_like_scheduler.visits.feedback import VisitStatusMessage
from swh_like_scheduler.visits.model import LastVisitStatus, ListedOrigin, VisitStatus

T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
LISTED = [f"https://forge.example/listed{n}" for n in range(3)]
STRAY = [f"https://elsewhere.example/stray{n}" for n in range(3)]
SNAP = bytes(range(20))


def setup(store: SQLAlchemyStore) -> None:
    store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
    lister = str(store.get_or_create_lister("gitlab", now=T0).id)
    store.record_listed_origins([ListedOrigin(lister, u, "git") for u in LISTED], now=T0)


def rows(store: SQLAlchemyStore) -> dict[str, dict[str, Any]]:
    """Every statistics row, by url: its columns (and its version on PostgreSQL)."""
    c = stats_t.c
    columns: list[Any] = [*STATS, c.enabled, c.first_seen, c.lister_id, c.held, c.held_since]
    if store.engine.dialect.name == "postgresql":
        columns.append(sa.literal_column("xmin::text").label("version"))
    with store.engine.connect() as conn:
        return {r.url: dict(r._mapping) for r in conn.execute(sa.select(*columns))}


def status(url: str, at: datetime, kind: str, snapshot: str | None = None) -> VisitStatusMessage:
    return VisitStatusMessage(url, "git", at, VisitStatus(kind), snapshot)


def test_unfinished_statuses_write_no_row(store: SQLAlchemyStore) -> None:
    setup(store)
    before = rows(store)
    assert sorted(before) == LISTED  # a listing makes its origins' rows
    unfinished = [
        status(url, T0 + timedelta(minutes=n), kind)
        for n, url in enumerate(LISTED + STRAY)
        for kind in ("created", "ongoing")
    ]
    assert store.record_visit_statuses(unfinished) == (0, 12)
    assert rows(store) == before  # no row made, none changed (nor its version)


def test_a_finished_status_writes_once_and_again_nothing(store: SQLAlchemyStore) -> None:
    setup(store)
    done = [status(LISTED[0], T0, "full", SNAP.hex()), status(LISTED[1], T0, "failed")]
    assert store.record_visit_statuses(done) == (2, 0)
    after = rows(store)
    assert len(after) == 3
    assert after[LISTED[0]]["last_visit_status"] == LastVisitStatus.SUCCESSFUL.value
    again = [*done, status(LISTED[0], T0 - timedelta(hours=1), "partial", SNAP.hex())]
    assert store.record_visit_statuses(again) == (0, 3)  # repeated, and older
    assert rows(store) == after


def test_a_finished_status_of_an_unlisted_origin_makes_its_row(store: SQLAlchemyStore) -> None:
    """The reference's journal client upserts the statistics of any origin
    a finished status names; a lister listing it later finds its visit."""
    setup(store)
    assert store.record_visit_statuses([status(STRAY[0], T0, "full", SNAP.hex())]) == (1, 0)
    found = rows(store)
    assert sorted(found) == sorted([*LISTED, STRAY[0]])
    assert found[STRAY[0]]["first_seen"] is None  # no policy picks it: unlisted
    lister = str(store.get_or_create_lister("cgit", now=T0).id)
    store.record_listed_origins([ListedOrigin(lister, STRAY[0], "git")], now=T0 + timedelta(1))
    (stats,) = store.origin_visit_stats_get([(STRAY[0], "git")])
    assert stats.last_visit == T0 and stats.last_snapshot == SNAP.hex()


@dataclass
class _Message:
    data: bytes
    at: int

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return self.data

    def topic(self) -> str:
        return "swh.journal.objects.origin_visit_status"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.at


@dataclass
class _Consumer:
    values: list[bytes]
    committed: bool = False

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        taken, self.values = self.values[:num_messages], self.values[num_messages:]
        return [_Message(v, n) for n, v in enumerate(taken)]

    def commit(self, *args: Any, **kwargs: Any) -> None:
        self.committed = True

    def seek(self, partition: Any) -> None:
        raise AssertionError("no rewind expected")

    def close(self) -> None:
        pass


def _journal_value(url: str, at: datetime, kind: str) -> bytes:
    body = {"origin": url, "visit": 1, "date": at, "type": "git", "status": kind}
    return msgpack.packb({**body, "snapshot": None, "metadata": None}, datetime=True)


def test_the_journal_client_writes_nothing_for_unfinished_visits(store: SQLAlchemyStore) -> None:
    setup(store)
    before = rows(store)
    values = [
        _journal_value(url, T0 + timedelta(seconds=n), kind)
        for n, url in enumerate(LISTED + STRAY)
        for kind in ("created", "ongoing")
    ]
    consumer = _Consumer(values)
    done = journal_step(store, consumer, batch=100)
    assert (done.received, done.changed, done.ignored, done.unreadable) == (12, 0, 12, 0)
    assert consumer.committed and rows(store) == before
    # then the visits end: two failures, one not found of a stray origin
    ends = [
        _journal_value(LISTED[0], T0 + timedelta(hours=1), "failed"),
        _journal_value(LISTED[0], T0 + timedelta(hours=2), "failed"),
        _journal_value(STRAY[1], T0 + timedelta(hours=1), "not_found"),
    ]
    done = journal_step(store, _Consumer(ends), batch=100)
    assert (done.changed, done.ignored) == (3, 0)
    after = rows(store)
    assert sorted(after) == sorted([*LISTED, STRAY[1]])
    assert after[LISTED[0]]["successive_visits"] == 2
    assert after[LISTED[1]] == before[LISTED[1]]


def test_the_listeners_feed_writes_nothing_for_a_repeated_status(store: SQLAlchemyStore) -> None:
    setup(store)
    feed = VisitFeed(store)
    event = {
        "name": "loader.git",
        "origin": LISTED[2],
        "status": "full",
        "snapshot": SNAP.hex(),
        "eventful": True,
        "date": T0.isoformat(),
    }
    not_ours = {**event, "name": "some.other.task", "origin": STRAY[2]}
    assert feed.apply([event, not_ours]) == (1, 1)
    after = rows(store)
    assert feed.apply([event, not_ours]) == (0, 2)
    assert rows(store) == after and STRAY[2] not in after
