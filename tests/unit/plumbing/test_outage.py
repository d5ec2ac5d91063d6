"""One log line per outage (pure: a fake clock)."""

from __future__ import annotations

import logging

import pytest

from swh_like_scheduler.plumbing.outage import Outage


def test_one_error_per_outage_and_one_line_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    outage = Outage(logging.getLogger("tests.outage"), "runner pass", clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="tests.outage")
    outage.ok()  # nothing to say while it works
    for _ in range(5):
        outage.failed(ConnectionError("database down"))
        now[0] += 10
    assert outage.down
    outage.ok()
    outage.ok()
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.levelname for r in errors] == ["ERROR", "WARNING"]
    assert "database down" in errors[0].getMessage()
    assert "works again after 50 s (5 failed attempts)" in errors[1].getMessage()
    assert not outage.down
    outage.failed(ConnectionError("again"))  # a new outage: a new line
    assert [r.levelname for r in caplog.records if r.levelno >= logging.WARNING][-1] == "ERROR"
