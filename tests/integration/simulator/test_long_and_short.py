"""The shipped worlds run; issue 46's world: a nightly wave of two-hour dumps must not starve the
pings of a tenth of a second that share their workers. No dispatch order
can stop it (a free slot takes the ready dump when no ping is ready at that
instant); keeping slots from long runs does."""

from __future__ import annotations

from typing import Any

import pytest
from cuts import scale

from swh_like_scheduler.domain.model import DispatchOrder
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.workload import SHIPPED, load_workload

#: a fifth of the world (two workers at 50 %: one slot kept), over the
#: start of the first dump wave (02:00 to 06:00) in the quick cut, two days
#: in the full one
TASKS = scale(126, 630)
DAYS = scale(0.25, 2.0)


def _run(keep_slots: bool, order: DispatchOrder = DispatchOrder.DEADLINE) -> dict[str, Any]:
    workload = load_workload("long-and-short").with_tasks(TASKS).with_days(DAYS).with_load(0.5)
    assert workload.workers["fetch"] >= 2
    return Simulation(workload, order, keep_slots=keep_slots).run()


def _hours(result: dict[str, Any], group: str) -> float:
    return float(result["groups"][group]["error_hours"])


def test_keeping_slots_from_long_runs_keeps_the_short_tasks_ok_through_the_wave() -> None:
    starved = _run(keep_slots=False)
    kept = _run(keep_slots=True)
    # without: the wave takes every slot and the pings go stale for hours
    assert _hours(starved, "hourly pings") > 100
    # with: the pings and pages never wait for a slot
    assert _hours(kept, "hourly pings") == 0
    assert _hours(kept, "pages") == 0
    # the dumps wait longer, and the whole is far better
    assert _hours(kept, "nightly dumps") >= _hours(starved, "nightly dumps")
    assert kept["error_hours"] < starved["error_hours"] / 5


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_workload_runs(name: str) -> None:
    """A moment of each shipped world through the real code: its tasks are
    created as the store and the argument checks take them (the mixed
    platform's one-shots once met the webhook worker's URL check)."""
    workload = load_workload(name).with_tasks(60).with_days(0.02)
    result = Simulation(workload, DispatchOrder.DEADLINE).run()
    assert result["events"]["sample"] >= 1
    assert set(result["types"]) == {t.type for t in workload.types}
