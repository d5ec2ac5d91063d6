"""Cron work lost beside the stretch of cron groups (issue 61, part 5):
under overload a cron group's stretch is empty or counts only the tasks
that ran twice; the firings no run served say what it cannot."""

from __future__ import annotations

import pytest

from swh_like_scheduler.domain.model import DispatchOrder
from swh_like_scheduler.simulator.compare import describe
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.report import page
from swh_like_scheduler.simulator.workload import parse_workload

#: Worked by hand. Three nightly dumps (cron 01:00, 12 h allowed after each
#: firing), each run exactly 10 h, one worker, two days. Firings at 1 h and
#: 25 h; both windows close (13 h, 37 h) within the 48 h: 6 owed. The
#: worker runs A 1-11 h, B 11-21 h, C 21-31 h (C still running when the
#: 25 h firing comes: claimed at its end), then A 31-41 h, B 41-51 h; C's
#: second run waits in the queue past the horizon: 1 firing lost. Only A's
#: gap (1 h to 31 h) ended within the horizon: the stretch says x1.25 from
#: one survivor, the lost firing says what it cannot.
NIGHTLY = {
    "start": "2026-03-02T00:00:00Z",
    "days": 2,
    "seed": 1,
    # (a pass at most every 10 min when idle: the firings wake it on time)
    "runner": {"period": "10 min", "sample_every": "2 h"},
    "types": {"dump": {"workers": 1}},
    "tasks": [
        {
            "name": "nightly",
            "type": "dump",
            "count": 3,
            "kind": "cron",
            "cron": "0 1 * * *",
            "cron_max_duration": "12 h",
            "duration": {"median": "10 h", "sigma": 0},
        }
    ],
}


def test_cron_work_lost_is_counted_beside_the_stretch() -> None:
    workload = parse_workload(NIGHTLY)
    result = Simulation(workload, DispatchOrder.DEADLINE).run()
    nightly = result["groups"]["nightly"]
    assert (nightly["runs_owed"], nightly["runs_lost"]) == (6, 1)
    assert nightly["intervals_delivered"] == 1 and nightly["stretch"] == pytest.approx(1.25)
    assert result["queued_at_end"] == 1
    # the worker ran from 1 h to the end: 47 of 48 h
    assert result["types"]["dump"]["busy_share"] == pytest.approx(47 / 48, abs=1e-3)
    # the report's intervals table says it beside the stretch
    results = {
        "workload": describe(workload),
        "orders": ["deadline"],
        "loads": [None],
        "runs": [{"order": "deadline", "load": None, **result}],
    }
    assert "| nightly | 24.0 h | 30.0 h (x1.25), 1 of 6 firings lost |" in page(results, [])
