"""How many worker slots serve a queue, from the live workers' replies
(``inspect active_queues`` and ``inspect stats``), as the runner's
:class:`LiveWorkers` keeps them: a fake control answers (a pure unit test:
the real broadcast is in ``tests/integration/dispatch/test_runner_reserve.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from swh_like_scheduler.dispatch import routing
from swh_like_scheduler.dispatch.routing import LiveWorkers


class FakeInspect:
    def __init__(self, control: FakeControl, destination: list[str] | None) -> None:
        self.control, self.destination = control, destination

    def active_queues(self) -> dict[str, Any]:
        if self.control.down:
            raise ConnectionError("broker down")
        return {h: [{"name": q} for q in qs] for h, qs in self.control.queues.items()}

    def stats(self) -> dict[str, Any]:
        self.control.stats_asked.append(sorted(self.destination or []))
        if self.control.down:
            raise ConnectionError("broker down")
        asked = self.destination or list(self.control.pools)
        return {
            h: {"pool": {"max-concurrency": n}}
            for h, n in self.control.pools.items()
            if h in asked and h not in self.control.silent
        }


class FakeControl:
    def __init__(self) -> None:
        self.queues: dict[str, list[str]] = {}
        self.pools: dict[str, int] = {}
        self.silent: set[str] = set()
        self.stats_asked: list[list[str]] = []
        self.down = False

    def inspect(self, destination: list[str] | None = None, timeout: float = 1.0) -> FakeInspect:
        return FakeInspect(self, destination)


class FakeApp:
    def __init__(self) -> None:
        self.control = FakeControl()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(routing.time, "monotonic", lambda: now[0])
    return now


def test_the_slots_of_a_queue_are_its_live_workers_pool_sizes(clock: list[float]) -> None:
    app = FakeApp()
    app.control.queues = {"w1@a": ["git", "svn"], "w2@b": ["git"]}
    app.control.pools = {"w1@a": 4, "w2@b": 2}
    workers = LiveWorkers(app)  # type: ignore[arg-type]
    workers.refresh()
    assert (workers.slots("git"), workers.slots("svn"), workers.slots("none")) == (6, 4, None)


def test_a_worker_that_does_not_say_makes_the_slots_unknown(clock: list[float]) -> None:
    app = FakeApp()
    app.control.queues = {"w1@a": ["git"], "w2@b": ["git"]}
    app.control.pools = {"w1@a": 4, "w2@b": 2}
    app.control.silent = {"w2@b"}
    workers = LiveWorkers(app)  # type: ignore[arg-type]
    workers.refresh()
    assert workers.slots("git") is None  # never a count that leaves one out


def test_new_workers_are_asked_at_once_and_all_again_after_the_ttl(clock: list[float]) -> None:
    app = FakeApp()
    app.control.queues = {"w1@a": ["git"]}
    app.control.pools = {"w1@a": 4}
    workers = LiveWorkers(app, ttl=30, stats_ttl=300)  # type: ignore[arg-type]
    workers.refresh()
    assert workers.slots("git") == 4
    # a second worker comes up: only it is asked, at the next refresh
    app.control.queues["w2@b"] = ["git"]
    app.control.pools["w2@b"] = 8
    clock[0] += 31
    workers.refresh()
    assert workers.slots("git") == 12
    assert app.control.stats_asked[-1] == ["w2@b"]
    # the first one autoscales: seen once the pool sizes are stale
    app.control.pools["w1@a"] = 2
    clock[0] += 31
    workers.refresh()
    assert workers.slots("git") == 12
    clock[0] += 300
    workers.refresh()
    assert workers.slots("git") == 10
    assert app.control.stats_asked[-1] == ["w1@a", "w2@b"]


def test_a_worker_gone_takes_its_slots_and_a_failed_broadcast_leaves_none(
    clock: list[float],
) -> None:
    app = FakeApp()
    app.control.queues = {"w1@a": ["git"], "w2@b": ["git"]}
    app.control.pools = {"w1@a": 4, "w2@b": 2}
    workers = LiveWorkers(app)  # type: ignore[arg-type]
    workers.refresh()
    del app.control.queues["w2@b"]
    workers.refresh(force=True)
    assert workers.slots("git") == 4
    app.control.down = True
    workers.refresh(force=True)
    assert workers.slots("git") is None
