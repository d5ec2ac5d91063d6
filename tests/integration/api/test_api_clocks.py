"""Hosts and workers whose clocks are off the database's, on the HTTP face:
``/health`` names them in ``clocks_off`` and ``warnings`` and keeps its
status (the platform decides on the database's clock), and the console's
overview shows the warning."""

from __future__ import annotations

import httpx
from api_server import Clock

from swh_like_scheduler.domain.records import WorkerSighting
from swh_like_scheduler.store import SQLAlchemyStore


def test_health_warns_of_clocks_off_by_more_than_its_bound(
    store: SQLAlchemyStore, clock: Clock, anonymous: httpx.Client
) -> None:
    store.record_worker_sightings(
        [
            WorkerSighting("behind@box", clock.now, True, 2.0, 10),
            WorkerSighting("right@box", clock.now, True, 2.0, 11),
            WorkerSighting("gone@box", clock.now, False, 2.0, 12),
        ]
    )
    store.record_worker_clocks({"behind@box": 90.05, "right@box": 0.4, "gone@box": 300.0})
    store.record_host_clock("runner:r1:1", role="runner", offset_seconds=-90.0)
    store.record_host_clock("listener:l1:2", role="listener", offset_seconds=1.5)
    answer = anonymous.get("/health")
    body = answer.json()
    assert answer.status_code == 200 and body["status"] == "ok", body
    assert body["clocks_off"] == [
        {"host": "runner:r1:1", "role": "runner", "offset_seconds": -90.0},
        {"host": "behind@box", "role": "worker", "offset_seconds": 90.05},
    ]
    assert body["warnings"] == [
        "the clock of runner runner:r1:1 is 90.0 s ahead of the database's: the platform "
        "uses the database's clock, but set this host's right (NTP)",
        "the clock of worker behind@box is 90.0 s behind the database's: the platform "
        "uses the database's clock, but set this host's right (NTP)",
    ]
    # set right: nothing to say
    store.record_worker_clocks({"behind@box": None})
    store.record_host_clock("runner:r1:1", role="runner", offset_seconds=0.01)
    body = anonymous.get("/health").json()
    assert body["clocks_off"] == [] and body["warnings"] == []
