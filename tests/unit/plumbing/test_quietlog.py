"""Repeated failures: the first at once, then one line per interval with a count."""

from __future__ import annotations

import logging

import pytest

from swh_like_scheduler.plumbing.quietlog import QuietLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_interval_and_kind(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    quiet = QuietLog(logging.getLogger("quiet-test"), logging.WARNING, every=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="quiet-test"):
        assert quiet.log("run %s: database away", "r1", key="db")
        for n in range(4039):
            clock.now += 0.01
            assert not quiet.log("run %s: database away", f"r{n}", key="db")
        assert quiet.log("broker away", key="broker")  # another kind: written
        assert quiet.left_out("db") == 4039
        clock.now = 161.0
        assert quiet.log("run %s: database away", "r-last", key="db")
        assert quiet.left_out("db") == 0
        clock.now += 1
        assert not quiet.log("run %s: database away", "r-again", key="db")
        quiet.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "run r1: database away",
        "broker away",
        "run r-last: database away [and 4039 more like it in 61 s]",
        "run r-again: database away [1 like it in 1 s]",
    ]
    # after a flush, the next occurrence is written at once
    assert quiet.log("run %s: database away", "r-new", key="db")


def test_ok_ends_an_outage_of_one_kind(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    quiet = QuietLog(logging.getLogger("quiet-ok"), logging.ERROR, every=60, clock=clock)
    with caplog.at_level(logging.ERROR, logger="quiet-ok"):
        quiet.log("depth: %s", "refused", key="depth")
        clock.now += 1
        quiet.log("depth: %s", "refused", key="depth")
        quiet.ok("depth")  # it works again: the count is written
        quiet.ok("other")  # nothing held: nothing written
        clock.now += 1
        quiet.log("depth: %s", "timed out", key="depth")  # a new outage: at once
    assert [r.getMessage() for r in caplog.records] == [
        "depth: refused",
        "depth: refused [1 like it in 1 s]",
        "depth: timed out",
    ]
