"""The monitor publishes its steal settings for the workers' self-fencing
bound (:mod:`swh_like_scheduler.monitor.terms`): the process holding the
lock does, at each pass; another does not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from swh_like_scheduler.monitor import MONITOR_LOCK, MonitorSettings, monitor_tick
from swh_like_scheduler.store import SQLAlchemyStore

S = timedelta(seconds=1)
H = timedelta(hours=1)


def test_the_monitor_publishes_its_ping_timeout_and_grace(store: SQLAlchemyStore) -> None:
    now = datetime.now(UTC)
    settings = MonitorSettings(ping_timeout=4 * S, grace=2 * S, holder="me")
    assert store.acquire_lock(MONITOR_LOCK, holder="someone", ttl=H).held
    monitor_tick(store, now, settings=settings)
    assert store.lease_terms() is None  # not the monitor: nothing published
    store.release_lock(MONITOR_LOCK, holder="someone")
    monitor_tick(store, now, settings=settings)
    terms = store.lease_terms()
    assert terms is not None
    assert (terms.ping_timeout, terms.grace, terms.holder) == (4 * S, 2 * S, "me")
    assert terms.bound == 3.0 and terms.margin == 3.0
    # new settings at the next pass (a monitor restarted with other ones)
    monitor_tick(store, now, settings=MonitorSettings(ping_timeout=30 * S, holder="me"))
    terms = store.lease_terms()
    assert terms is not None and terms.ping_timeout == 30 * S and terms.bound == 22.5
