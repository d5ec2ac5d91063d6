"""Measures that say what was promised (issue 46, part 3): the interval
delivered against the interval written (stretch), peaks over the workers,
``--load`` and max_allowed_duration, and ``--from-store``'s load from each
task's own schedule. Each case is small and worked by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import DispatchOrder, TaskType
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.simulator.compare import compare
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.live import from_store
from swh_like_scheduler.simulator.peaks import peak_overloads
from swh_like_scheduler.simulator.report import page
from swh_like_scheduler.simulator.workload import parse_workload
from swh_like_scheduler.store import SQLAlchemyStore

#: six hours. ``job``: three periodic tasks (every hour, no cooldown) of 30
#: min exactly on one worker: they take turns, each starts every 90 min
#: (stretch 1.5). ``cron``: two hourly cron tasks with a worker each (on
#: time: 1.0). ``crawl``: adaptive tasks whose visits always find a change
#: (the rule shortens their interval from 1 h towards 30 min). ``ping``:
#: one-shots (none).
STRETCHED = {
    "days": 0.25,
    "seed": 1,
    "runner": {"sample_every": "30 min"},
    "types": {
        "job": {"workers": 1, "max_queue_length": 10},
        "cron": {"workers": 2},
        "crawl": {
            "workers": 2,
            "default_interval": "1 h",
            "min_interval": "30 min",
            "max_interval": "4 h",
            "backoff_factor": 2,
        },
        "ping": {"workers": 1},
    },
    "tasks": [
        {
            "name": "hourly",
            "type": "job",
            "count": 3,
            "kind": "periodic",
            "period": "1 h",
            "cooldown": "0 s",
            "duration": {"median": "30 min", "sigma": 0},
        },
        {
            "name": "on the hour",
            "type": "cron",
            "count": 2,
            "kind": "cron",
            "cron": "0 * * * *",
            "cron_max_duration": "20 min",
            "duration": {"median": "1 min", "sigma": 0},
        },
        {
            "name": "always changing",
            "type": "crawl",
            "count": 2,
            "kind": "adaptive",
            "duration": {"median": "1 min", "sigma": 0},
        },
        {"name": "once", "type": "ping", "count": 2, "kind": "oneshot", "duration": "1 min"},
    ],
}


def test_each_group_says_the_interval_written_and_delivered() -> None:
    result = Simulation(parse_workload(STRETCHED), DispatchOrder.DEADLINE).run()
    groups = result["groups"]
    hourly = groups["hourly"]
    # A starts at 0, 90, 180, 270 min, B 30 min later, C 60 min later (+ a
    # runner pass): 3 gaps each, counted when the run ends well (C's last
    # ends with the horizon: not counted)
    assert hourly["interval_written_s"] == 3600
    assert hourly["intervals_delivered"] == 8
    assert hourly["interval_delivered_s"] == pytest.approx(5400, rel=0.01)
    assert hourly["stretch"] == pytest.approx(1.5, rel=0.01)
    assert hourly["interval_scheduled_s"] is None
    cron = groups["on the hour"]
    # firings at 1 h ... 5 h: 4 gaps per task
    assert cron["interval_written_s"] == 3600
    assert cron["intervals_delivered"] == 8
    assert cron["stretch"] == pytest.approx(1.0, abs=0.01)
    crawl = groups["always changing"]
    assert crawl["interval_written_s"] == 3600
    assert 1800 <= crawl["interval_scheduled_s"] < 3600
    # visited more often than written: the interval rule's own doing
    assert crawl["interval_delivered_s"] < 3600 and crawl["stretch"] < 1
    assert groups["once"]["interval_written_s"] is None
    assert groups["once"]["stretch"] is None and groups["once"]["intervals_delivered"] == 0
    # the report's table, printed by the CLI too
    results = {
        "workload": {
            "name": "w",
            "tasks": 9,
            "days": 0.25,
            "start": "2026-03-02T00:00:00+00:00",
            "seed": 1,
            "workers": {},
            "natural_load": {},
        },
        "orders": ["deadline"],
        "loads": [None],
        "runs": [{"order": "deadline", "load": None, **result}],
    }
    text = page(results, [])
    assert "| group | written | deadline |" in text
    assert "| hourly | 60 min | 90 min (x1.50) |" in text
    assert "| once |" not in text.split("| group | written |")[1]


#: twenty one-shots of a minute due together at 10 min, one worker: 20
#: worker-minutes in a minute, the last waits 19 min; a mean load of 28 %
BURST = """
days = 0.05
seed = 1
[runner]
sample_every = "12 min"
[types.notify]
workers = 1
[[tasks]]
name = "burst"
type = "notify"
count = 20
kind = "oneshot"
spread = ["10 min", "10 min"]
duration = { median = "1 min", sigma = 0 }
"""


def run(*args: str, db_url: str | None = None) -> Result:
    prefix = ["scheduler", *(["--db-url", db_url] if db_url else [])]
    return CliRunner().invoke(swh, [*prefix, "simulate", *args])


def test_a_peak_over_the_workers_is_warned_reported_and_in_the_json(tmp_path: Path) -> None:
    path = tmp_path / "burst.toml"
    path.write_text(BURST)
    result = run(str(path), "--policy", "deadline", "--json")
    assert result.exit_code == 0, (result.output, result.stderr)
    warning = (
        "warning: peak over the workers: notify: 20 min of work falls due "
        "2026-03-02 00:10-00:11 UTC, 20.0 workers' worth against 1 (mean load 28%); "
        "a run due then waits 19 min at best, and the burst drains in 20 min"
    )
    assert warning in result.stderr
    (run_data,) = json.loads(result.stdout)["runs"]
    peak = run_data["peak_overload"]["notify"]
    assert peak["window_start"] == "2026-03-02T00:10:00+00:00"
    assert (peak["demand_workers"], peak["delay_s"], peak["drain_s"]) == (20.0, 1140.0, 1200.0)
    text = run(str(path), "--policy", "deadline").stdout
    assert "## Load as written; peak over the workers: notify\n" in text
    assert "- notify: 20 min of work falls due from 2026-03-02T00:10:00+00:00" in text


#: one run of 8 min (exactly) due at the start, killed after 10 min: a
#: twentieth of a worker over 2.4 h; at 10 % load its run takes 14.4 min
LIMITED = {
    "days": 0.1,
    "seed": 1,
    "runner": {"sample_every": "12 min"},
    "types": {"job": {"workers": 1, "max_allowed_duration": "10 min"}},
    "tasks": [
        {
            "type": "job",
            "count": 1,
            "kind": "oneshot",
            "max_delay": "1 h",
            "duration": {"median": "8 min", "sigma": 0},
        }
    ],
}


def test_load_lengthens_the_limit_with_the_runs_unless_kept() -> None:
    workload = parse_workload(LIMITED)
    said: list[str] = []
    scaled = compare(workload, [DispatchOrder.DEADLINE], [0.1], progress=said.append)
    (run_data,) = scaled["runs"]
    assert "timed_out" not in run_data["outcomes"]
    limit = run_data["run_limits"]["job"]
    assert limit["run_factor"] == pytest.approx(1.8)
    assert limit["scaled"] and limit["simulated_max_allowed_duration_s"] == pytest.approx(1080)
    assert (limit["share_over_before"], limit["share_over_after"]) == (0, 0)
    assert any(line.startswith("note: load 10%: max_allowed_duration") for line in said)
    said.clear()
    kept = compare(
        workload, [DispatchOrder.DEADLINE], [0.1], progress=said.append, scale_limits=False
    )
    (run_data,) = kept["runs"]
    assert run_data["outcomes"].get("timed_out", 0) >= 1
    limit = run_data["run_limits"]["job"]
    assert not limit["scaled"] and limit["simulated_max_allowed_duration_s"] == 600
    assert (limit["share_over_before"], limit["share_over_after"]) == (0, 1)
    assert any("exceed its max_allowed_duration (10 min) 100% of the time" in s for s in said)
    assert "kept at 10 min (--keep-limits)" in page(kept, [])


def test_keep_limits_goes_with_load(tmp_path: Path) -> None:
    path = tmp_path / "burst.toml"
    path.write_text(BURST)
    result = run(str(path), "--keep-limits")
    assert result.exit_code == 2
    assert "--keep-limits goes with --load" in result.stderr and "simulating" not in result.stderr


NOW = datetime(2026, 3, 2, 0, 30, tzinfo=UTC)


def test_from_store_counts_each_task_from_its_own_schedule(sqlite_url: str) -> None:
    """The average run is 10 min (2 min for the reports, 1 min for the
    notifications); a simulated run is log-normal with that mean (sigma
    0.5: its median is the average over 1.133). Per type, over one day:
    six adaptive tasks every 4 h (their type's default is a day), four
    periodic ones every 30 min of cooldown plus a run, two hourly cron
    tasks (24 firings), ten one-shots due in the day (and ten after it)."""
    store = SQLAlchemyStore.from_url(sqlite_url)
    day = timedelta(days=1)
    types = {
        "crawl": TaskType(type="crawl", backend_name="crawl", default_interval=day),
        "scrape": TaskType(type="scrape", backend_name="scrape", default_interval=day),
        "report": TaskType(type="report", backend_name="report"),
        "notify": TaskType(type="notify", backend_name="notify"),
    }
    for task_type in types.values():
        store.create_task_type(task_type)
    soon = (NOW + timedelta(hours=2)).isoformat()
    specs = [
        *[("crawl", {"kind": "adaptive", "interval": "4 h", "expected_duration": "10 min"})] * 6,
        *[
            (
                "scrape",
                {"kind": "periodic", "period": "1 h", "cooldown": "30 min"}
                | {"expected_duration": "10 min"},
            )
        ]
        * 4,
        *[
            (
                "report",
                {"kind": "cron", "cron": "0 * * * *", "cron_max_duration": "20 min"}
                | {"expected_duration": "2 min"},
            )
        ]
        * 2,
        *[("notify", {"kind": "oneshot", "next_run": soon, "expected_duration": "1 min"})] * 10,
        *[
            (
                "notify",
                {"kind": "oneshot", "next_run": (NOW + 2 * day).isoformat()}
                | {"expected_duration": "1 min"},
            )
        ]
        * 10,
    ]
    tasks = [
        task_from_input({"next_run": NOW.isoformat(), **values, "args": [n]}, types[name], now=NOW)
        for n, (name, values) in enumerate(specs)
    ]
    store.create_tasks(tasks, now=NOW)
    workload, given = from_store(store, NOW, days=1)
    store.close()
    expected = {
        "crawl": 6 * 10 / 240,
        "scrape": 4 * 10 / (30 + 10),
        "report": 2 * 24 * 2 / 1440,
        "notify": 10 * 1 / 1440,
    }
    assert workload.demand() == pytest.approx(expected, rel=1e-6)
    assert workload.natural_load() == pytest.approx(expected, rel=1e-6)
    # the ten notifications due together at 02:30: 10 min of work on one worker
    peak = peak_overloads(workload, given)["notify"]
    assert peak.start == NOW + timedelta(hours=2)
    assert peak.work == pytest.approx(10 * 60)
