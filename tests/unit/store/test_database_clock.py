"""The database's clock, as a daemon reads it: its host's clock plus the
offset measured against the database (one query per ``every``)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.exceptions import StoreUnavailable
from swh_like_scheduler.domain.records import HostClock
from swh_like_scheduler.store.clock import DatabaseClock

T0 = datetime(2026, 12, 2, 12, tzinfo=UTC)


class Host:
    """A host clock that moves only when told, and a monotonic one beside it."""

    def __init__(self) -> None:
        self.at = T0
        self.mono = 100.0

    def local(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)
        self.mono += seconds


class Database:
    """A store whose clock is ``skew`` ahead of the host's (the host is behind)."""

    def __init__(self, host: Host, skew: timedelta) -> None:
        self.host, self.skew = host, skew
        self.reads = 0
        self.recorded: list[tuple[str, str, float]] = []
        self.down = False

    def database_now(self) -> datetime:
        if self.down:
            raise StoreUnavailable("down")
        self.reads += 1
        return self.host.at + self.skew

    def record_host_clock(self, holder: str, *, role: str, offset_seconds: float) -> HostClock:
        self.recorded.append((holder, role, offset_seconds))
        return HostClock(holder, role, offset_seconds, self.host.at + self.skew)


def clock(host: Host, database: Database, **options: object) -> DatabaseClock:
    return DatabaseClock(
        database,  # type: ignore[arg-type]
        role="runner",
        holder="runner:box:1",
        local=host.local,
        monotonic=host.monotonic,
        **options,  # type: ignore[arg-type]
    )


def test_now_is_the_databases_clock_measured_once_per_period() -> None:
    host = Host()
    database = Database(host, timedelta(seconds=-90))  # the host is 90 s ahead
    ours = clock(host, database, every=60.0)
    assert ours.now() == T0 - timedelta(seconds=90)
    assert ours.offset == timedelta(seconds=-90)
    host.advance(30)
    assert ours.now() == T0 + timedelta(seconds=30 - 90)
    assert database.reads == 1  # no query until the period is over
    host.advance(31)
    ours.now()
    assert database.reads == 2
    assert database.recorded == [("runner:box:1", "runner", -90.0)] * 2


def test_an_offset_past_the_bound_is_said_once_then_when_it_moves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = Host()
    database = Database(host, timedelta(seconds=-90))
    ours = clock(host, database, every=1.0)
    with caplog.at_level(logging.INFO, logger="swh_like_scheduler.store.clock"):
        for _ in range(3):
            ours.now()
            host.advance(2)
        database.skew = timedelta(seconds=-95)
        ours.now()
        host.advance(2)
        database.skew = timedelta(0)
        ours.now()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3, said
    assert said[0].startswith("this host's clock is 90.0 s ahead of the database's")
    assert said[1].startswith("this host's clock is 95.0 s ahead of the database's")
    assert "within 0:00:02 of the database's again" in said[2]
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING", "INFO"]


def test_a_host_behind_is_said_behind_and_a_small_offset_not_at_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = Host()
    with caplog.at_level(logging.INFO, logger="swh_like_scheduler.store.clock"):
        clock(host, Database(host, timedelta(seconds=1.5))).now()
        assert not caplog.records
        clock(host, Database(host, timedelta(seconds=12))).now()
    assert "12.0 s behind the database's" in caplog.records[0].getMessage()


def test_the_round_trip_midpoint_stands_for_the_instant_read() -> None:
    host = Host()

    class Slow(Database):
        def database_now(self) -> datetime:
            value = super().database_now()  # read as the query leaves
            self.host.advance(1)  # and the answer is back a second later
            return value

    database = Slow(host, timedelta(0))
    ours = clock(host, database)
    host_before = host.at
    offset = ours.measure()
    # read at host_before (before the advance), midpoint host_before + 0.5 s
    assert offset == timedelta(seconds=-0.5)
    assert host.at == host_before + timedelta(seconds=1)


def test_a_database_away_keeps_the_last_offset_and_tries_again_soon() -> None:
    host = Host()
    database = Database(host, timedelta(seconds=30))
    ours = clock(host, database, every=60.0)
    assert ours.now() == T0 + timedelta(seconds=30)
    database.down = True
    host.advance(61)
    assert ours.now() == host.at + timedelta(seconds=30)  # the last offset
    database.down = False
    database.skew = timedelta(seconds=40)
    host.advance(4)
    assert ours.now() == host.at + timedelta(seconds=30)  # not yet tried again
    host.advance(2)
    assert ours.now() == host.at + timedelta(seconds=40)


def test_never_measured_is_the_hosts_clock() -> None:
    host = Host()
    database = Database(host, timedelta(seconds=30))
    database.down = True
    assert clock(host, database).now() == T0
