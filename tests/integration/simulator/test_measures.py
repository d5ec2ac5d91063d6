"""What a simulation measures: retries counted as retries, lateness at
start beside lateness at dispatch, loads reached or said not to be, and the
worker search (issue 32, items 3 to 5). Each case is small and worked by
hand."""

from __future__ import annotations

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import DispatchOrder
from swh_like_scheduler.simulator.compare import compare, find_workers
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.report import page
from swh_like_scheduler.simulator.workload import parse_workload

#: Twenty one-shot tasks due at the start, one worker, runs of 10 min
#: exactly, a queue that takes them all: the first pass (at 0 s) sends all
#: twenty, each exactly at its should_start_by (nobody late at dispatch).
#: The worker starts them at 0, 10, ..., 140 min (fifteen); five are still
#: queued when the 144 min horizon ends.
QUEUED = {
    "days": 0.1,
    "seed": 1,
    "runner": {"sample_every": "12 min"},
    "types": {"job": {"workers": 1, "max_queue_length": 100}},
    "tasks": [
        {
            "type": "job",
            "count": 20,
            "kind": "oneshot",
            "max_delay": "0 s",
            "duration": {"median": "10 min", "sigma": 0},
        }
    ],
}


def test_time_in_the_queue_counts_as_lateness_at_start() -> None:
    result = Simulation(parse_workload(QUEUED), DispatchOrder.DEADLINE).run()
    assert result["dispatches"] == 20
    assert result["dispatched_late"] == 0
    assert result["lateness_p99_s"] == 0
    # at start: 0, 600, ..., 8400 s, and five still queued at 8640 s
    assert result["queued_at_end"] == 5
    assert result["started_late"] == 19
    assert result["start_lateness_p50_s"] == pytest.approx((5400 + 6000) / 2)
    assert result["start_lateness_p99_s"] == pytest.approx(8640)
    job = result["types"]["job"]
    assert (job["queued_at_end"], job["started_late"]) == (5, 19)
    assert job["start_lateness_p99_s"] == pytest.approx(8640)
    assert job["lateness_p99_s"] == 0
    assert result["start_lateness_cdf"][-1] == [8640.0, 1.0]


def test_lateness_at_start_of_the_case_worked_by_hand() -> None:
    # test_simulation.HAND: tasks dispatched at 0, 60 and 120 s; started at
    # 0 and 60 s by the two workers; the third waits in the queue of one
    # until the first run ends at 30 min
    from test_simulation import HAND

    result = Simulation(parse_workload(HAND), DispatchOrder.DEADLINE).run()
    assert result["started_late"] == 2
    assert result["start_lateness_p50_s"] == 60.0
    assert result["start_lateness_p99_s"] == pytest.approx(60 + (1800 - 60) * 0.98)
    assert result["queued_at_end"] == 0


def _failing(retries: int) -> dict[str, object]:
    """One periodic task whose every run fails, over 6 hours."""
    return {
        "days": 0.25,
        "seed": 1,
        "runner": {"sample_every": "30 min"},
        "types": {
            "job": {
                "workers": 1,
                "num_retries": retries,
                "retry_delay": "5 min",
                "retry_growth": 1,
                "retry_jitter": "0 s",
            }
        },
        "tasks": [
            {
                "type": "job",
                "count": 1,
                "kind": "periodic",
                "period": "1 h",
                "cooldown": "30 min",
                "duration": {"median": "1 min", "sigma": 0},
                "failure": 1.0,
            }
        ],
    }


@pytest.mark.parametrize("budget", [0, 1, 2])
def test_retries_count_the_runs_that_retry_a_failure(budget: int) -> None:
    """Every run fails. With ``num_retries`` R a cycle is a failed run and R
    retries; then the task goes back to its schedule (that run is not a
    retry). Run k (from 1) is a retry when (k - 2) mod (R + 1) < R, k > 1.
    Counting every run after a failure would give runs - 1."""
    result = Simulation(parse_workload(_failing(budget)), DispatchOrder.DEADLINE).run()
    runs = sum(result["outcomes"].values())
    assert result["outcomes"] == {"failed": runs}
    assert runs >= 5
    expected = sum(1 for k in range(2, runs + 1) if (k - 2) % (budget + 1) < budget)
    assert result["retries"] == expected
    assert result["retries"] < runs - 1
    assert result["types"]["job"]["retries"] == expected


#: a type whose tasks ask for a twelfth of a worker (one adaptive task of 10
#: min every 2 h), beside one that asks for several
SMALL_DEMAND = {
    "days": 0.1,
    "seed": 1,
    "runner": {"sample_every": "30 min"},
    "types": {
        "big": {"workers": 1, "default_interval": "1 h", "min_interval": "1 h"},
        "tiny": {"workers": 1, "default_interval": "2 h", "min_interval": "1 h"},
    },
    "tasks": [
        {"type": "big", "count": 30, "kind": "adaptive", "duration": "10 min"},
        {"type": "tiny", "count": 1, "kind": "adaptive", "duration": "10 min"},
    ],
}


def test_a_load_not_reached_is_said_and_not_claimed() -> None:
    warnings: list[str] = []
    workload = parse_workload(SMALL_DEMAND)
    results = compare(workload, [DispatchOrder.DEADLINE], [1.5], progress=warnings.append)
    (run,) = results["runs"]
    # big: 5 workers' worth at 150 %: 4 workers, runs 6 / 5 as long; tiny:
    # one worker at 1/12, its runs would have to be 18x as long
    assert run["types"]["big"]["natural_load"] == pytest.approx(1.5)
    assert run["types"]["tiny"]["natural_load"] == pytest.approx(1 / 12, abs=1e-4)
    assert run["load_not_reached"] == {"tiny": pytest.approx(1 / 12)}
    assert any(w.startswith("warning: load 150%: tiny reaches only 8%") for w in warnings)
    text = page(results, [])
    assert "## Load 150% for big; tiny only 8%" in text
    assert "## Load 150%\n" not in text


def test_the_search_refuses_at_once_what_no_worker_count_fixes() -> None:
    """Periodic tasks (every 4 h, cooldown 3 h) kept out of 01:00-06:00 go
    stale every night whatever the workers: the search says so after one
    simulation, with a worker per task, naming the type, the group and the
    cause."""
    data = {
        "days": 1,
        "seed": 1,
        "runner": {"sample_every": "10 min"},
        "types": {"scrape": {"workers": 1}, "other": {"workers": 1}},
        "tasks": [
            {
                "name": "kept out of the night",
                "type": "scrape",
                "count": 3,
                "kind": "periodic",
                "period": "4 h",
                "cooldown": "3 h",
                "blackout_periods": [["01:00", "06:00"]],
                "spread": ["0 s", "10 min"],
                "duration": "1 min",
            },
            {"type": "other", "count": 2, "kind": "oneshot", "duration": "1 min"},
        ],
    }
    tried: list[str] = []
    with pytest.raises(InvalidInput) as refused:
        find_workers(parse_workload(data), DispatchOrder.DEADLINE, progress=tried.append)
    assert tried == ["simulating with workers {'other': 2, 'scrape': 3}"]
    message = refused.value.message
    assert "\n" not in message
    assert "scrape" in message and "other" not in message
    assert "'kept out of the night'" in message and "by construction" in message


def test_the_search_neither_restarts_at_zero_nor_repeats_a_trial() -> None:
    """Five one-shot tasks of 30 min due at once, ERROR after 40 min: five
    workers are needed. A worker per task first (5: meets the target), then
    1, 2, 4 miss and the doubling stops at the task count, 5, already
    known: the answer, in four simulations. (Before: 1, 2, 4, 8, then 4
    again from 0, 6, 5, and 5 again.)"""
    data = {
        "days": 0.1,
        "seed": 3,
        "runner": {"min_sleep": "1 s", "listener_delay": "1 s", "sample_every": "7 min"},
        "types": {"job": {"workers": 1, "max_allowed_duration": "40 min"}},
        "tasks": [
            {
                "type": "job",
                "count": 5,
                "kind": "oneshot",
                "max_delay": "0 s",
                "duration": {"median": "30 min", "sigma": 0},
            }
        ],
    }
    sizing = find_workers(parse_workload(data), DispatchOrder.DEADLINE)
    assert sizing.workers == {"job": 5}
    tried = [t.workers["job"] for t in sizing.trials]
    assert tried == [5, 1, 2, 4]
    assert [t.error_hours["job"] > 0 for t in sizing.trials] == [False, True, True, True]
