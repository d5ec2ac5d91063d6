"""Contract: the database's clock (``database_now``), the hosts' offsets from
it (``record_host_clock``, ``get_host_clocks``) and the workers'
(``record_worker_clocks``, ``clock_offset`` of ``get_workers``), on every
store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.records import HostClock, WorkerSighting

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_the_databases_clock_is_the_database_servers_now(store: Any) -> None:
    before = datetime.now(tz=UTC)
    read = store.database_now()
    after = datetime.now(tz=UTC)
    assert read.tzinfo is not None and read.utcoffset() == timedelta(0)
    # the servers here share this host's clock: within the round trip
    assert before - timedelta(seconds=1) <= read <= after + timedelta(seconds=1)
    assert store.database_now() >= read  # it moves on


def test_a_hosts_offset_is_recorded_at_the_databases_instant_one_row_per_holder(
    store: Any,
) -> None:
    first = store.record_host_clock("runner:box:1", role="runner", offset_seconds=-90.25)
    assert isinstance(first, HostClock)
    assert (first.holder, first.role, first.offset_seconds) == ("runner:box:1", "runner", -90.25)
    store.record_host_clock("listener:box:2", role="listener", offset_seconds=0.01)
    again = store.record_host_clock("runner:box:1", role="runner", offset_seconds=-89.5)
    assert again.measured_at >= first.measured_at
    found = store.get_host_clocks()
    assert [(c.holder, c.role, c.offset_seconds) for c in found] == [
        ("listener:box:2", "listener", 0.01),
        ("runner:box:1", "runner", -89.5),
    ]
    assert found[1].measured_at == again.measured_at
    # measured since an instant to come: none
    assert store.get_host_clocks(since=again.measured_at + timedelta(minutes=1)) == []


@pytest.mark.parametrize("offset", [float("nan"), float("inf"), 1e12, "90", True])
def test_an_offset_that_is_not_a_believable_number_is_refused(store: Any, offset: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        store.record_host_clock("runner:box:1", role="runner", offset_seconds=offset)
    assert refused.value.field == "offset_seconds"
    assert store.get_host_clocks() == []


def test_the_workers_offsets_are_kept_in_their_rows(store: Any) -> None:
    store.record_worker_sightings(
        [WorkerSighting("a@box", T0, True, 2.0, 10), WorkerSighting("b@box", T0, True, 2.0, 20)]
    )
    assert {w.hostname: w.clock_offset for w in store.get_workers()} == {
        "a@box": None,
        "b@box": None,
    }
    store.record_worker_clocks({"a@box": 90.05, "nobody@box": 3.0})
    store.record_worker_clocks({})
    assert {w.hostname: w.clock_offset for w in store.get_workers()} == {
        "a@box": 90.05,
        "b@box": None,
    }
    # heartbeats leave it as it is; None forgets it
    store.record_worker_sightings(
        [WorkerSighting("a@box", T0 + timedelta(seconds=2), True, 2.0, 10)]
    )
    assert store.get_workers()[0].clock_offset == 90.05
    store.record_worker_clocks({"a@box": None})
    assert store.get_workers()[0].clock_offset is None
    with pytest.raises(InvalidInput):
        store.record_worker_clocks({"a@box": float("nan")})
