"""Simulations on the real runner pass, store, policy and listener."""

from __future__ import annotations

import json

import pytest
from cuts import scale

from swh_like_scheduler.domain.model import RUNNER_ORDER, DispatchOrder
from swh_like_scheduler.health.conditions import summarise
from swh_like_scheduler.simulator.compare import compare, find_workers
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.report import dumps, write_report
from swh_like_scheduler.simulator.workload import load_workload, parse_workload

#: Worked by hand. Three one-shot tasks due at the start (max_delay 0,
#: finish_by = start + 40 min, the type's max_allowed_duration), each run
#: 30 min exactly, two workers, a queue of one message. The runner claims
#: one task per pass (capacity 1 - depth) and, its queue full, sleeps its
#: period (60 s): task 1 is claimed at 0 s, task 2 at 60 s, task 3 at 120 s
#: (lateness 0, 60 and 120 s). Workers take 1 at 0 s and 2 at 60 s; 3 waits
#: in the queue until 1 ends at 30 min, then runs until 60 min, so it is in
#: ERROR after 40 min until its end is recorded at 60 min + 1 s. Samples
#: every 7 min: 0, 7, ... 35 all OK (3, 3, 3, 3, 3 live tasks, then 1 at 35
#: once 1 and 2 completed at 30 and 31 min), ERROR at 42, 49 and 56 min (3
#: x 7 min = 0.35 ERROR-hours), nothing live from 63 min.
HAND = {
    "start": "2026-03-02T00:00:00Z",
    "days": 0.1,
    "seed": 3,
    "runner": {
        "period": "60 s",
        "min_sleep": "1 s",
        "listener_delay": "1 s",
        "sample_every": "7 min",
    },
    "types": {"job": {"workers": 2, "max_queue_length": 1, "max_allowed_duration": "40 min"}},
    "tasks": [
        {
            "type": "job",
            "count": 3,
            "kind": "oneshot",
            "max_delay": "0 s",
            "duration": {"median": "30 min", "sigma": 0},
        }
    ],
}


def test_a_scenario_worked_by_hand() -> None:
    result = Simulation(parse_workload(HAND), DispatchOrder.DEADLINE).run()
    assert result["dispatches"] == 3
    assert result["dispatched_late"] == 2
    assert result["lateness_p50_s"] == 60.0
    assert result["lateness_p99_s"] == pytest.approx(118.8)
    assert result["outcomes"] == {"eventful": 3}
    assert result["error_hours"] == pytest.approx(0.35)
    assert result["warning_hours"] == 0
    levels = [
        (round(t["hours"] * 60), t["OK"], t["WARNING"], t["ERROR"]) for t in result["timeline"]
    ]
    assert levels == [
        (0, 3, 0, 0),
        (7, 3, 0, 0),
        (14, 3, 0, 0),
        (21, 3, 0, 0),
        (28, 3, 0, 0),
        (35, 1, 0, 0),
        (42, 0, 0, 1),
        (49, 0, 0, 1),
        (56, 0, 0, 1),
        (63, 0, 0, 0),
        *[(m, 0, 0, 0) for m in range(70, 144, 7)],
    ]
    assert result["types"]["job"]["queue_depth_max"] == 1


#: a small mix that a laptop simulates in seconds: 3.3 workers' worth of
#: periodic, adaptive and one-shot work for 3 workers, over 6 hours
SMALL = {
    "days": 0.25,
    "seed": 5,
    "runner": {"sample_every": "10 min"},
    "types": {
        "job": {
            "workers": 3,
            "max_queue_length": 20,
            "num_retries": 1,
            "retry_delay": "1 min",
            "default_interval": "2 h",
            "min_interval": "1 h",
            "max_interval": "1 day",
            "backoff_factor": 2,
        }
    },
    "tasks": [
        {
            "type": "job",
            "count": 40,
            "kind": "periodic",
            "period": "1 h",
            "cooldown": "30 min",
            "spread": ["0 s", "1 h"],
            "duration": {"median": "5 min", "sigma": 0.5},
            "failure": 0.1,
        },
        {
            "type": "job",
            "count": 10,
            "kind": "adaptive",
            "spread": ["0 s", "2 h"],
            "duration": "4 min",
            "changes_every": ["1 h", "1 day"],
        },
        {
            "type": "job",
            "count": 10,
            "kind": "oneshot",
            "max_delay": "10 min",
            "priority": "high",
            "spread": ["0 s", "6 h"],
            "duration": "1 min",
        },
    ],
}


def test_same_workload_and_seed_give_the_same_bytes() -> None:
    # (the quick cut: 2 of the mix's 6 hours, enough for every kind of task
    # to run, fail, retry and queue; the full one the whole mix)
    workload = parse_workload({**SMALL, "days": scale(1 / 12, SMALL["days"])})
    orders = [DispatchOrder.DEADLINE, DispatchOrder.RANDOM]
    first = dumps(compare(workload, orders))
    assert first == dumps(compare(workload, orders))
    other = json.loads(dumps(compare(workload.with_seed(99), orders[:1])))
    assert other["runs"][0] != json.loads(first)["runs"][0]


def test_orders_meet_the_same_world_and_overload_shows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    workload = parse_workload(SMALL)
    orders = [DispatchOrder.DEADLINE, DispatchOrder.FIFO]
    results = compare(workload, orders, [0.5, 3.0])
    runs = {(r["order"], r["load"]): r for r in results["runs"]}
    for order in ("deadline", "fifo"):
        # at half load only failures make tasks late (a periodic task whose
        # retry fails too waits for its next period); at three times the
        # capacity, many are
        assert runs[(order, 0.5)]["error_hours"] * 5 < runs[(order, 3.0)]["error_hours"]
        assert runs[(order, 0.5)]["dispatched_late"] * 5 < runs[(order, 3.0)]["dispatched_late"]
        for load in (0.5, 3.0):
            load_reached = runs[(order, load)]["types"]["job"]["natural_load"]
            assert load_reached == pytest.approx(load, rel=0.05)
    # one world: the same tasks meet the same fates whatever the order, so
    # at half load (everything runs, in time) the outcomes are the same
    assert runs[("deadline", 0.5)]["outcomes"] == runs[("fifo", 0.5)]["outcomes"]
    written = write_report(results, tmp_path / "report")
    names = sorted(p.name for p in written)
    assert names == [
        "conditions-0.png",
        "conditions-1.png",
        "error-hours-by-load.png",
        "lateness-0.png",
        "lateness-1.png",
        "report.md",
        "results.json",
    ]
    page = (tmp_path / "report" / "report.md").read_text()
    assert "## Load 300%" in page and "![error-hours-by-load.png]" in page
    assert "| group | deadline | fifo |" in page
    assert (tmp_path / "report" / "conditions-0.png").read_bytes()[:4] == b"\x89PNG"


def test_find_workers_finds_the_smallest_count() -> None:
    # two one-shot tasks of 30 min due at once, ERROR after 40 min: one
    # worker leaves the second in ERROR, two keep both OK
    hand = {**HAND, "types": {"job": {"workers": 1, "max_allowed_duration": "40 min"}}}
    hand["tasks"] = [{**HAND["tasks"][0], "count": 2}]  # type: ignore[index]
    sizing = find_workers(parse_workload(hand), DispatchOrder.DEADLINE)
    assert sizing.workers == {"job": 2}
    assert sizing.error_hours == {"job": 0.0}
    # a worker per task first (none can do better), then the count written,
    # then doubling reaches 2, already tried: no simulation is repeated
    tried = [t.workers["job"] for t in sizing.trials]
    assert tried == [2, 1]


class CheckedSimulation(Simulation):
    """Compares, at every sample, the watch's counts (tasks read again only
    when changed, conditions judged again only when they may have moved)
    with the operator's summary (``task status``) computed from scratch."""

    checked = 0

    def _sample(self) -> None:
        expected = summarise(self.store, self.now()).counts
        counts = self.watch.counts(self.now(), self.store.changed)
        self.store.changed = set()
        assert counts == expected, self.now()
        self.checked += 1
        self.recorder.sample(self.now(), counts, {})


def test_the_condition_watch_counts_as_task_status_does() -> None:
    blackouts = {
        "type": "job",
        "count": 10,
        "kind": "periodic",
        "period": "2 h",
        "cooldown": "1 h",
        "blackout_periods": [["01:00", "02:30"]],
        "duration": "3 min",
    }
    data = {**SMALL, "runner": {"sample_every": "3 min"}, "tasks": [*SMALL["tasks"], blackouts]}
    simulation = CheckedSimulation(parse_workload(data).with_load(2.0), DispatchOrder.DEADLINE)
    result = simulation.run()
    assert simulation.checked == 120
    assert result["error_hours"] > 0 and result["warning_hours"] > 0


#: simulated days of the overloaded fleet, in the quick cut and the full one
#: (``SWH_SLOW=full``): the orders part on the second day (both end the
#: first one alike), and the simulation's cost is about linear in days
FLEET_DAYS = scale(1.75, 2.5)


def test_the_default_order_keeps_more_of_an_overloaded_fleet_ok_than_fifo() -> None:
    # the shipped crawler fleet, scaled down, at 150 % of its capacity: the
    # runner's default order (deadline, with the policy engine's interval
    # rules) ends with at most half FIFO's ERROR-hours (swh-scheduler's
    # runner, Celery beat); the groups' hours add up to the totals
    workload = load_workload("crawler-fleet").with_tasks(600).with_days(FLEET_DAYS)
    results = compare(workload, [RUNNER_ORDER, DispatchOrder.FIFO], [1.5])
    default, fifo = results["runs"]
    assert default["order"] == RUNNER_ORDER.value and fifo["order"] == "fifo"
    assert fifo["error_hours"] > 0
    # measured: 72 / 311 over 1.75 days (seeds 3 and 4: 80 / 348, 22 / 257),
    # 98 / 500 over 2.5 days
    assert default["error_hours"] <= 0.5 * fifo["error_hours"]
    for run in (default, fifo):
        groups = run["groups"]
        assert sorted(groups) == sorted(g.name for g in workload.groups)
        total = sum(g["error_hours"] for g in groups.values())
        assert total == pytest.approx(run["error_hours"])


def _outage(catch_up: str) -> dict[str, object]:
    """Ten hourly cron tasks, the runner down from 1 h 30 to 7 h 30."""
    return {
        "start": "2026-03-02T00:00:00Z",
        "days": 0.5,
        "seed": 5,
        "runner": {
            "period": "60 s",
            "min_sleep": "30 s",
            "sample_every": "1 h",
            "down_from": "90 min",
            "down_for": "6 h",
        },
        "types": {"cron": {"workers": 10, "catch_up": catch_up, "catch_up_grace": "10 min"}},
        "tasks": [
            {
                "type": "cron",
                "count": 10,
                "kind": "cron",
                "cron": "0 * * * *",
                "cron_max_duration": "30 min",
                "duration": {"median": "1 min", "sigma": 0},
            }
        ],
    }


def test_an_outage_under_each_catch_up_policy() -> None:
    """Firings at 1 h .. 11 h within the 12 h horizon; the runner misses
    2 h .. 7 h (six). ``latest`` runs them once, late, at 7 h 30; ``skip``
    drops all six, recorded as one skipped run per task. Both run 1 h and
    8 h .. 11 h on time."""
    latest = Simulation(parse_workload(_outage("latest")), DispatchOrder.DEADLINE).run()
    skip = Simulation(parse_workload(_outage("skip")), DispatchOrder.DEADLINE).run()
    assert latest["events"].get("skipped", 0) == 0
    assert skip["events"]["skipped"] == 10
    # 1 h, then the late run at 7 h 30, then 8 h .. 11 h (12 h is past the horizon)
    assert latest["dispatches"] == 10 * (1 + 1 + 4)
    assert skip["dispatches"] == 10 * (1 + 4)
