"""``swh scheduler simulate``: loads said as reached, refusals before any
simulation, and the documentation's ``--from-store`` example (the
simulation guide, ``docs/howto/simulate.md``) on the demo database
(issue 32, items 3, 4 and 6)."""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.standalone.examples import create_examples, register_task_types
from swh_like_scheduler.store import SQLAlchemyStore

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "howto" / "simulate.md"

#: a type asking for 5 workers' worth at 150 % and one asking for 1/12 of one
WORKLOAD = """
days = 0.05
seed = 1
[runner]
sample_every = "30 min"
[types.big]
workers = 1
default_interval = "1 h"
min_interval = "1 h"
[types.tiny]
workers = 1
default_interval = "2 h"
min_interval = "1 h"
[[tasks]]
type = "big"
count = 30
kind = "adaptive"
duration = "10 min"
[[tasks]]
type = "tiny"
count = 1
kind = "adaptive"
duration = "10 min"
"""

#: periodic tasks kept out of 01:00-06:00, stale every night whatever the workers
BLACKOUT = """
days = 1
seed = 1
[runner]
sample_every = "10 min"
[types.scrape]
workers = 1
[[tasks]]
name = "kept out of the night"
type = "scrape"
count = 3
kind = "periodic"
period = "4 h"
cooldown = "3 h"
blackout_periods = [["01:00", "06:00"]]
spread = ["0 s", "10 min"]
duration = "1 min"
"""


def run(*args: str, db_url: str | None = None) -> Result:
    prefix = ["scheduler", *(["--db-url", db_url] if db_url else [])]
    return CliRunner().invoke(swh, [*prefix, "simulate", *args])


@pytest.fixture
def workload(tmp_path: Path) -> str:
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    return str(path)


def test_a_load_not_reached_is_warned_and_headed_as_reached(workload: str) -> None:
    result = run(workload, "--load", "1.5", "--policy", "deadline")
    assert result.exit_code == 0, (result.output, result.stderr)
    assert "warning: load 150%: tiny reaches only 8%" in result.stderr
    assert "## Load 150% for big; tiny only 8%" in result.stdout
    assert "## Load 150%\n" not in result.stdout
    # the report says which lateness is which
    assert "| late at dispatch | p50 / p99 at dispatch | late at start |" in result.stdout


def test_workers_and_load_are_refused_together(workload: str) -> None:
    result = run(workload, "--load", "1.5", "--workers", "big=3")
    assert result.exit_code == 2
    assert "--workers and --load" in result.stderr
    assert "simulating" not in result.stderr and "Traceback" not in result.output


def test_load_is_refused_with_from_store(sqlite_url: str) -> None:
    result = run("--from-store", "--load", "1.5", db_url=sqlite_url)
    assert result.exit_code == 2
    assert "load: --load scales a workload file's runs" in result.stderr


def test_report_without_the_plotting_extra_fails_before_simulating(
    workload: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    result = run(workload, "--report", str(tmp_path / "r"))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'plots' extra" in lines[0], lines
    assert not (tmp_path / "r").exists()


def test_find_workers_refuses_what_no_worker_count_fixes(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text(BLACKOUT)
    result = run(str(path), "--find-workers", "--policy", "deadline")
    assert result.exit_code == 2
    assert result.stderr.count("simulating") == 1  # the worker-per-task check only
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert "scrape" in error and "'kept out of the night'" in error
    assert "by construction" in error
    assert "Traceback" not in result.output + result.stderr


def _guide_from_store_example() -> list[str]:
    text = GUIDE.read_text("utf-8")
    lines = [
        line.split("#")[0].strip()
        for line in text.splitlines()
        if line.startswith("swh scheduler simulate --from-store")
    ]
    assert lines, "the simulation guide has a --from-store example"
    return shlex.split(lines[0])[2:]  # after "swh scheduler"


def test_the_guide_from_store_example_runs_on_the_demo_database(sqlite_url: str) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    register_task_types(store)
    assert create_examples(store, datetime.now(tz=UTC))
    store.close()
    args = _guide_from_store_example()
    assert args[:2] == ["simulate", "--from-store"]
    # as written, over a shorter horizon (the last --days wins) to keep the test short
    shorter = ["--days", "0.02", "--policy", "deadline", "--json"]
    result = CliRunner().invoke(swh, ["scheduler", "--db-url", sqlite_url, *args, *shorter])
    assert result.exit_code == 0, (result.output, result.stderr)
    data = json.loads(result.stdout)
    assert data["workload"]["tasks"] > 100
    assert data["runs"][0]["dispatches"] > 0
