"""Token buckets per client: a burst, then the rate; clients apart; bounded memory."""

from __future__ import annotations

from swh_like_scheduler.api import ratelimit
from swh_like_scheduler.api.ratelimit import Buckets


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate_then_a_wait() -> None:
    clock = Clock()
    buckets = Buckets(rate=2.0, burst=4.0, clock=clock)
    assert [buckets.take("a") for _ in range(4)] == [None] * 4
    assert buckets.take("a") == 1  # empty: wait a second
    assert buckets.take("b") is None  # another client has its own bucket
    clock.now += 0.5  # one request's worth comes back
    assert buckets.take("a") is None and buckets.take("a") == 1
    clock.now += 60  # refilled up to the burst, not beyond
    assert [buckets.take("a") for _ in range(5)] == [None] * 4 + [1]


def test_the_buckets_of_many_clients_stay_bounded(monkeypatch: object) -> None:
    monkeypatch.setattr(ratelimit, "MAX_CLIENTS", 100)  # type: ignore[attr-defined]
    buckets = Buckets(rate=1.0, burst=1.0, clock=Clock())
    for n in range(1000):
        buckets.take(f"10.0.{n // 256}.{n % 256}")
    assert len(buckets._buckets) == 100
