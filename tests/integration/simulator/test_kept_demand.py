"""The simulator's demand measure (:class:`~swh_like_scheduler.simulator.
demand.KeptDemand`: each task's share kept, read again only once written)
against the store's own aggregate query, at every measure of a day."""

from __future__ import annotations

import pytest

from swh_like_scheduler.domain.model import RUNNER_ORDER, ScheduleKind
from swh_like_scheduler.monitor.duties import MonitorSettings
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.observed import PRIVATE_SQLITE
from swh_like_scheduler.simulator.workload import load_workload
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.tables import task as task_t


class CheckedDemand(Simulation):
    """Before each load measure, the demand the store's aggregate query
    finds (every live adaptive task read); after it, the demand the kept
    shares gave, as written on each type."""

    measures = 0
    nonzero = 0

    def _monitor(self):  # type: ignore[no-untyped-def]
        settings = MonitorSettings()
        adaptive = task_t.c.schedule_kind == ScheduleKind.ADAPTIVE.value
        while True:
            with self.store.engine.connect() as conn:
                expected = SQLAlchemyStore._demand(self.store, conn, adaptive)
            loads = self.store.measure_type_loads(
                now=self.now(), window=settings.load_window, slack=settings.load_slack
            )
            found = {name: load.demand for name, load in loads.items()}
            wanted = {name: expected.get(name, 0.0) for name in loads}
            assert found == pytest.approx(wanted, rel=1e-12), self.now()
            self.measures += 1
            self.nonzero += any(found.values())
            yield self.env.timeout(settings.load_every.total_seconds())


def test_the_kept_demand_is_the_aggregate_at_every_measure() -> None:
    fleet = load_workload("crawler-fleet").with_tasks(400)
    workload = fleet.with_days(0.25)
    simulation = CheckedDemand(workload, RUNNER_ORDER, db_url=PRIVATE_SQLITE)
    result = simulation.run()
    assert simulation.measures == 72 and simulation.nonzero >= 60
    # the runs changed durations and intervals: the shares were read again
    assert result["dispatches"] >= 100
    # the shares of the fleet's adaptive tasks were kept, not read each time
    kept = simulation.store._type_of
    assert kept is not None and len(kept) > 0
