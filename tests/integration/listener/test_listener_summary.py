"""What the listener drops is counted by reason (Prometheus) and told in a
periodic summary line, never silently (SQLite store, no broker needed)."""

from __future__ import annotations

import logging
import random

import pytest
from listenertest import make_test_app
from prometheus_client import REGISTRY

from swh_like_scheduler.listener import Listener, ListenerOptions, metrics, poison
from swh_like_scheduler.store import SQLAlchemyStore


def dropped_metric(reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "swh_scheduler_listener_events_dropped_total", {"reason": reason}
    )
    return value or 0.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_dropped_events_are_counted_by_reason_and_summarised(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    clock = Clock()
    listener = Listener(
        make_test_app("memory://"),
        store,
        rng=random.Random(0),
        options=ListenerOptions(summary_every=60.0),
        clock=clock,
    )
    before = {r: dropped_metric(r) for r in ("unknown_run", "malformed", "not_an_event")}
    unknown = [
        {"type": "task-started", "uuid": f"not-ours-{n}", "timestamp": 1e9, "hostname": "w@n"}
        for n in range(5)
    ]
    listener.receive(unknown)
    assert listener.flush()
    poison.guarded(lambda event: None, ["not", "a", "mapping"])
    poison.drop({"type": "task-started", "clock": "abc"}, ValueError("clock"))
    after = {r: dropped_metric(r) - before[r] for r in before}
    assert after == {"unknown_run": 5, "malformed": 1, "not_an_event": 1}
    assert metrics.dropped_by_reason()["unknown_run"] >= 5
    # the summary line: once the interval has passed, with the counts since the last one
    summary = metrics.Summary(60.0, clock)
    assert summary.tick(listener.stats.received, listener.stats.applied) is None  # too soon
    clock.now += 61
    with caplog.at_level(logging.INFO, logger="swh_like_scheduler.listener.metrics"):
        line = listener._summary.tick(listener.stats.received, listener.stats.applied)
    assert line is not None
    assert line.startswith("listener: 5 events received in 61 s; applied: unknown_run 5;")
    assert "dropped: " in line and "unknown_run 5" in line.split("dropped: ")[1]
    assert line in caplog.text
    clock.now += 61  # nothing new: no line
    assert listener._summary.tick(listener.stats.received, listener.stats.applied) is None
    store.close()
