"""The queue limit as a bound (issue 61, part 5): the runner hands a queue
at most ``max_queue_length`` messages a period when it fills, whatever the
workers; ``--find-workers`` scales the limit with each trial's workers."""

from __future__ import annotations

import pytest

from swh_like_scheduler.simulator.compare import notes
from swh_like_scheduler.simulator.pace import paces
from swh_like_scheduler.simulator.workload import parse_workload

#: 5,000 hourly targets: 5,000 / 3,600 = 1.39 runs a second. A queue of 8
#: with the runner's 60 s period hands over at most 8 / 60 = 0.13 a second:
#: the queue limit, not the 8 workers, bounds the runs (a tenth of them).
HOURLY = {
    "days": 1,
    "types": {
        "probe": {"workers": 8, "default_interval": "1 h", "max_queue_length": 8},
        "roomy": {"workers": 1, "default_interval": "1 h", "max_queue_length": 100},
    },
    "tasks": [
        {"type": "probe", "count": 5000, "duration": "1.7 s"},
        {"type": "roomy", "count": 50, "duration": "1.7 s"},
    ],
}


def test_a_queue_limit_that_caps_the_runs_is_said() -> None:
    workload = parse_workload(HOURLY)
    found = paces(workload)
    probe, roomy = found["probe"], found["roomy"]
    assert probe.asked == pytest.approx(5000 / 3600)
    assert probe.bound == pytest.approx(8 / 60)
    assert probe.binding and not roomy.binding
    lines = notes(workload, workload, None).lines
    (warning,) = [line for line in lines if "queue limit" in line]
    assert warning.startswith("warning: probe:") and "raise max_queue_length" in warning


def test_workers_scale_the_queue_limit_only_when_asked() -> None:
    workload = parse_workload(HOURLY)
    # --workers keeps the limit as written (and the bound is said)
    assert workload.with_workers({"probe": 80}).task_type("probe").max_queue_length == 8
    # the planner's trials scale it: the same queue per worker
    scaled = workload.with_workers({"probe": 80}, scale_queues=True)
    assert scaled.task_type("probe").max_queue_length == 80
    assert scaled.task_type("roomy").max_queue_length == 100
    assert paces(scaled)["probe"].bound == pytest.approx(80 / 60)
