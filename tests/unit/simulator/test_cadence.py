"""The interval a task's schedule promises as written, and the runs a live
task asks for (issue 46, part 3, items 1 and 4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.simulator.cadence import cycle, due_times, runs_within, written_interval
from swh_like_scheduler.simulator.workload import parse_workload

NOW = datetime(2026, 3, 2, 0, 30, tzinfo=UTC)
DAY = timedelta(days=1)
TYPE = TaskType(type="job", backend_name="job", default_interval=timedelta(hours=6))


def task(**values: object):  # type: ignore[no-untyped-def]
    return task_from_input({"next_run": NOW.isoformat(), **values}, TYPE, now=NOW)


def test_the_interval_as_written_per_kind() -> None:
    assert written_interval(task(kind="adaptive"), NOW, DAY) == 6 * 3600
    assert written_interval(task(kind="adaptive", interval="2 h"), NOW, DAY) == 7200
    assert written_interval(task(kind="periodic", period="4 h"), NOW, DAY) == 4 * 3600
    hourly = task(kind="cron", cron="0 * * * *", cron_max_duration="10 min")
    assert written_interval(hourly, NOW, DAY) == 3600
    # a weekly cron in a one-day horizon: still weekly
    weekly = task(kind="cron", cron="0 18 * * 5", tz="Europe/Paris", cron_max_duration="1 h")
    assert written_interval(weekly, NOW, DAY) == 7 * 86400
    # twice a day at 06:00 and 18:00: 12 h on average
    twice = task(kind="cron", cron="0 6,18 * * *", cron_max_duration="1 h")
    assert written_interval(twice, NOW, DAY) == pytest.approx(12 * 3600)
    assert written_interval(task(kind="oneshot"), NOW, DAY) is None


def test_the_runs_a_live_task_asks_for_within_the_horizon() -> None:
    ten = timedelta(minutes=10)
    # adaptive: every interval; periodic: every cooldown plus a run
    assert runs_within(task(kind="adaptive", interval="4 h"), ten, NOW, DAY) == 6
    periodic = task(kind="periodic", period="1 h", cooldown="50 min")
    assert runs_within(periodic, ten, NOW, DAY) == 24
    # cron: its firings from its next run (01:00) to the horizon's end (00:30)
    hourly = task(kind="cron", cron="0 * * * *", cron_max_duration="10 min")
    times = due_times(hourly, ten, NOW, DAY)
    assert len(times) == 24 and times[0] == datetime(2026, 3, 2, 1, tzinfo=UTC)
    assert runs_within(hourly, ten, NOW, DAY) == 24
    # one-shot: once when due within the horizon, overdue ones at the start
    assert runs_within(task(kind="oneshot"), ten, NOW, DAY) == 1
    late = task(kind="oneshot", next_run=(NOW - DAY).isoformat())
    assert due_times(late, ten, NOW, DAY) == [NOW]
    later = task(kind="oneshot", next_run=(NOW + 2 * DAY).isoformat())
    assert runs_within(later, ten, NOW, DAY) == 0


def test_a_default_cooldown_follows_the_runs() -> None:
    # period 10 h, runs of 1 h: the default cooldown is 90 % of the period
    # less twice the run, 7 h, so the task may run every 8 h (the store's
    # rule since the cooldown follows the runs' average)
    periodic = task(kind="periodic", period="10 h")
    assert cycle(periodic, timedelta(hours=1)) == timedelta(hours=8)
    given = task(kind="periodic", period="10 h", cooldown="5 h")
    assert cycle(given, timedelta(hours=1)) == timedelta(hours=6)
    workload = parse_workload(
        {
            "days": 1,
            "types": {"job": {"workers": 1}},
            "tasks": [
                {
                    "type": "job",
                    "kind": "periodic",
                    "period": "10 h",
                    "duration": {"median": "1 h", "sigma": 0},
                }
            ],
        }
    )
    assert workload.demand()["job"] == pytest.approx(1 / 8)
