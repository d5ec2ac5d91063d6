"""``--load`` and max_allowed_duration (issue 46, part 3, item 3): the
share of runs over the limit, before and after the runs are lengthened;
the limit lengthened with them by default, kept and warned on demand."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from swh_like_scheduler.simulator.limits import limit_lines, run_limits, share_over, shares_over
from swh_like_scheduler.simulator.workload import Duration, parse_workload

#: ten adaptive tasks every hour, runs of 5 min (median, sigma 0.5: 5.67
#: min on average), one worker, killed after 10 min: 0.94 of a worker
WORLD = {
    "days": 1,
    "types": {
        "job": {
            "workers": 1,
            "default_interval": "1 h",
            "max_allowed_duration": "10 min",
            "max_expected_duration": "8 min",
        },
        "free": {"workers": 1, "default_interval": "1 h"},
    },
    "tasks": [
        {"type": "job", "count": 10, "duration": {"median": "5 min", "sigma": 0.5}},
        {"type": "free", "count": 5, "duration": {"median": "5 min", "sigma": 0.5}},
    ],
}


def _phi_over(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def test_share_over_a_limit_of_a_log_normal_run() -> None:
    five = Duration(timedelta(minutes=5), 0.5)
    assert share_over(five, timedelta(minutes=5)) == pytest.approx(0.5)
    assert share_over(five, timedelta(minutes=10)) == pytest.approx(_phi_over(math.log(2) / 0.5))
    exact = Duration(timedelta(minutes=5))
    assert share_over(exact, timedelta(minutes=4)) == 1.0
    assert share_over(exact, timedelta(minutes=6)) == 0.0


def test_the_limit_is_lengthened_with_the_runs_by_default() -> None:
    workload = parse_workload(WORLD)
    before = _phi_over(math.log(2) / 0.5)  # 8.3 %
    assert shares_over(workload) == {"job": pytest.approx(before)}
    loaded = workload.with_load(1.5)
    factor = loaded.run_factors["job"]
    assert factor == pytest.approx(1.5 / workload.natural_load()["job"])
    job = loaded.task_type("job")
    assert job.max_allowed_duration == timedelta(minutes=10) * factor
    assert job.max_expected_duration == timedelta(minutes=8) * factor
    assert loaded.task_type("free").max_allowed_duration is None
    (limit,) = run_limits(workload, loaded).values()
    assert limit.scaled and not limit.noticed
    assert limit.before == pytest.approx(before) and limit.after == pytest.approx(before)
    (note,) = limit_lines(run_limits(workload, loaded), 1.5)
    assert note.startswith("note: load 150%: max_allowed_duration lengthened with the runs")
    assert f"job 10 min -> {10 * factor:.0f} min (x{factor:.2f})" in note


def test_a_kept_limit_says_how_many_more_runs_exceed_it() -> None:
    """Runs x1.59 with the limit kept at 10 min: a run exceeds it with
    probability 1 - Φ(ln(10 / 7.94) / 0.5) = 32 %, against 8.3 % as
    written: said with both shares."""
    workload = parse_workload(WORLD)
    kept = workload.with_load(1.5, scale_limits=False)
    assert kept.task_type("job").max_allowed_duration == timedelta(minutes=10)
    factor = kept.run_factors["job"]
    after = _phi_over(math.log(10 / (5 * factor)) / 0.5)
    limits = run_limits(workload, kept)
    limit = limits["job"]
    assert not limit.scaled and limit.noticed
    assert limit.after == pytest.approx(after)
    assert limit.to_json()["share_over_after"] == pytest.approx(after, abs=1e-4)
    assert limit.to_json()["simulated_max_allowed_duration_s"] == 600
    (warning,) = limit_lines(limits, 1.5)
    assert warning == (
        f"warning: load 150%: job's runs, x{factor:.2f} as long, exceed its "
        f"max_allowed_duration (10 min) {after:.0%} of the time instead of 8.3%: "
        "they are killed (timed_out) and retried"
    )
