"""A worker's clock, measured from its heartbeats received fresh, and its
events moved onto the database's clock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.records import WorkerSighting
from swh_like_scheduler.listener.clocks import WINDOW, WorkerClocks
from swh_like_scheduler.listener.events import EventKind, RunEvent

T0 = datetime(2026, 12, 2, 12, tzinfo=UTC)
S = timedelta(seconds=1)


def beat(name: str, at: datetime, online: bool = True) -> WorkerSighting:
    return WorkerSighting(name, at, online, 2.0, 41)


def test_a_worker_90_s_behind_has_its_events_moved_from_its_first_heartbeat(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clocks = WorkerClocks()
    received = T0 + 90 * S + 0.05 * S  # sent at T0 on its clock, 50 ms on the way
    with caplog.at_level(logging.WARNING, logger="swh_like_scheduler.listener.clocks"):
        changed = clocks.observe([beat("w@a", T0)], received)
    assert changed == {"w@a": pytest.approx(90.05)}
    assert "worker w@a's clock is 90.0 s behind the database's" in caplog.text
    end = RunEvent(EventKind.END, "id", T0 + 10 * S, "task-succeeded", "w@a", started=T0)
    moved = clocks.event(end)
    assert moved.at == end.at + timedelta(seconds=90.05)
    assert moved.started == T0 + timedelta(seconds=90.05)
    assert clocks.sighting(beat("w@a", T0)).at == T0 + timedelta(seconds=90.05)
    # another worker's events are left as they are
    other = RunEvent(EventKind.START, "id2", T0, "task-started", "w@b")
    assert clocks.event(other) is other
    assert clocks.event(RunEvent(EventKind.START, "id3", T0, "task-started", None)).at == T0


def test_the_least_delay_wins_and_a_small_offset_is_left_alone() -> None:
    clocks = WorkerClocks()
    # a worker whose clock is right, heard with delays of 0.2 to 5 s
    for n, delay in enumerate((5.0, 0.2, 3.0)):
        sent = T0 + n * 2 * S
        clocks.observe([beat("w@a", sent)], sent + delay * S)
    assert clocks.offset("w@a") is None  # 5 s at first, then 0.2 s: no clock at all
    # 30 s ahead of the database: the differences are negative
    for n in range(3):
        sent = T0 + (100 + 2 * n) * S
        clocks.observe([beat("w@b", sent)], sent - 30 * S + 0.1 * S)
    assert clocks.offset("w@b") == timedelta(seconds=-29.9)


def test_an_offset_that_moves_by_a_second_is_taken_and_old_samples_leave() -> None:
    clocks = WorkerClocks()
    clocks.observe([beat("w@a", T0)], T0 + 10 * S)
    assert clocks.offset("w@a") == 10 * S
    changed = clocks.observe([beat("w@a", T0 + 2 * S)], T0 + 2 * S + 9.5 * S)
    assert changed == {} and clocks.offset("w@a") == 10 * S  # under a second: kept
    clocks.observe([beat("w@a", T0 + 4 * S)], T0 + 4 * S + 8 * S)
    assert clocks.offset("w@a") == 8 * S
    # the clock set right: a smaller difference is taken at once
    changed = clocks.observe([beat("w@a", T0 + 10 * S)], T0 + 10 * S)
    assert clocks.offset("w@a") is None and changed == {"w@a": None}
    # set wrong again, further: the window forgets the smaller samples in time
    for n in range(WINDOW):
        sent = T0 + (20 + 2 * n) * S
        changed = clocks.observe([beat("w@a", sent)], sent + 20 * S)
    assert clocks.offset("w@a") == 20 * S


def test_offline_forgets_the_worker() -> None:
    clocks = WorkerClocks()
    clocks.observe([beat("w@a", T0)], T0 + 60 * S)
    assert clocks.observe([beat("w@a", T0, online=False)], T0 + 60 * S) == {"w@a": None}
    assert clocks.offset("w@a") is None
