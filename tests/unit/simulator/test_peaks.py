"""Peak demand from a workload's definition (issue 46, part 3, item 2): the
bursts a type's mean load hides, worked by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.simulator.peaks import (
    BIN,
    due_work,
    peak_overloads,
    peak_warning,
    peaks,
)
from swh_like_scheduler.simulator.workload import load_workload, parse_workload


def test_the_reminders_morning_burst_is_a_peak_over_two_workers() -> None:
    """3,000 one-shots of 0.5 s (median, sigma 0.5: 0.567 s on average) fall
    due at 07:00 on the second day: 1,700 worker-seconds in a minute, 28
    workers' worth against 2, though the type's mean load is 0.4 %. The last
    waits 1,700 / 2 - 60 s (a minute of both workers is gone) = 13 min, and
    the burst is drained 850 s after 07:00: 14 min (its max_delay is 10)."""
    workload = load_workload("reminders")
    assert workload.natural_load()["notify"] < 0.01
    found = peak_overloads(workload)
    notify = found["notify"]
    mean = 0.5 * 2.718281828 ** (0.5**2 / 2)
    work = 3000 * mean + 6000 * mean / (7 * 1440)  # the burst, and a minute of the week's
    assert notify.start == datetime(2026, 3, 3, 7, 0, tzinfo=UTC)
    assert notify.end == datetime(2026, 3, 3, 7, 1, tzinfo=UTC)
    assert notify.work == pytest.approx(work, rel=1e-3)
    assert notify.demand == pytest.approx(work / 60, rel=1e-3)
    assert notify.workers == 2
    assert notify.delay.total_seconds() == pytest.approx(work / 2 - 60, rel=1e-3)
    assert notify.drain is not None
    assert notify.drain.total_seconds() == pytest.approx(work / 2, rel=1e-2)
    line = peak_warning(notify)
    assert line.startswith("warning: peak over the workers: notify: 28 min of work")
    assert "2026-03-03 07:00-07:01 UTC" in line
    assert "28.3 workers' worth against 2 (mean load 0.4%)" in line
    assert "waits 13 min at best" in line and "drains in 14 min" in line
    # the weekly digest: 1,000 cron tasks fire at once on Friday 18:00 Paris
    assert found["digest"].start == datetime(2026, 3, 6, 17, 0, tzinfo=UTC)


def _cron_world(workers: int, count: int = 120) -> dict[str, object]:
    """``count`` cron tasks of 1 min (sigma 0) firing at 12:00 UTC."""
    return {
        "start": "2026-03-02T00:00:00Z",
        "days": 1,
        "types": {"job": {"workers": workers}},
        "tasks": [
            {
                "type": "job",
                "count": count,
                "kind": "cron",
                "cron": "0 12 * * *",
                "cron_max_duration": "2 h",
                "duration": {"median": "1 min", "sigma": 0},
            }
        ],
    }


def test_cron_tasks_firing_at_the_same_minute() -> None:
    """120 worker-minutes at 12:00 on 2 workers: a mean load of 120 / 2880
    (4 %), a peak of 120 workers' worth; 59 min of work still waits after
    the first minute, and the burst is done at 13:00."""
    peak = peak_overloads(parse_workload(_cron_world(2)))["job"]
    assert peak.mean_load == pytest.approx(120 / 2880)
    assert peak.start == datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert peak.work == pytest.approx(120 * 60)
    assert peak.demand == pytest.approx(120)
    assert peak.delay == timedelta(minutes=59)
    assert peak.drain == timedelta(hours=1)
    assert peak.to_json()["drain_s"] == 3600
    # 120 workers: done within the minute, nothing waits
    assert peaks(parse_workload(_cron_world(120))) == {}
    # a burst leaving the last run waiting under 5 min is not an overload
    assert peak_overloads(parse_workload(_cron_world(2, count=10))) == {}
    assert "job" in peaks(parse_workload(_cron_world(2, count=10)))


def test_a_uniform_workload_has_no_peak_and_its_work_adds_up() -> None:
    """100 adaptive tasks every hour, first runs spread over the hour: the
    work falls due evenly, the mean load is the peak; a load of 100 %
    leaves nothing waiting either (no rounding error counted as a burst)."""
    data = {
        "days": 1,
        "types": {"job": {"workers": 5, "default_interval": "1 h"}},
        "tasks": [
            {
                "type": "job",
                "count": 100,
                "kind": "adaptive",
                "spread": ["0 s", "1 h"],
                "duration": {"median": "3 min", "sigma": 0},
            }
        ],
    }
    workload = parse_workload(data)
    assert workload.natural_load() == {"job": pytest.approx(1.0)}
    work = due_work(workload)["job"]
    assert len(work) == 1440
    assert sum(work) == pytest.approx(100 * 180 * 24)
    assert max(work) == pytest.approx(5 * BIN)
    assert peaks(workload) == {}


def test_a_mean_load_over_the_workers_is_not_called_a_peak() -> None:
    # the same burst on a type already over its workers on average: work
    # waits anyway; the peak is measured, not warned
    data = _cron_world(1, count=2000)
    workload = parse_workload(data)
    assert workload.natural_load()["job"] > 1
    assert "job" in peaks(workload)
    assert peak_overloads(workload) == {}


def test_work_due_inside_a_blackout_window_falls_due_at_its_end() -> None:
    """1,440 one-shots of a minute spread over the day, kept out of
    09:00-18:00 UTC: the 540 due inside the window are due at 18:00."""
    data = {
        "start": "2026-03-02T00:00:00Z",
        "days": 1,
        "types": {"job": {"workers": 10}},
        "tasks": [
            {
                "type": "job",
                "count": 1440,
                "kind": "oneshot",
                "spread": ["0 s", "1 day"],
                "blackout_periods": [["09:00", "18:00"]],
                "duration": {"median": "1 min", "sigma": 0},
            }
        ],
    }
    workload = parse_workload(data)
    work = due_work(workload)["job"]
    assert sum(work) == pytest.approx(1440 * 60)
    assert work[9 * 60 + 30] == 0
    assert work[18 * 60] == pytest.approx((540 + 1) * 60)
    peak = peak_overloads(workload)["job"]
    assert peak.start == datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
    # 541 worker-minutes on 10 workers: 54 min; the next minutes add theirs
    assert peak.delay.total_seconds() == pytest.approx((541 - 10) * 60 / 10)
