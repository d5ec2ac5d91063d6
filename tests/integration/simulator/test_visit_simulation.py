"""The listed-origin simulation (simulator/visits.py): the store's own grabs,
feedback and metrics on a virtual clock, and the policies' semantics seen
from what the simulated workers were asked to visit."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.simulator.visits import VisitSimulation, VisitWorld, compare

SMALL = VisitWorld(origins=40, added_per_hour=2, days=0.5, workers=1, visit_minutes=5, seed=7)
#: every visit fast, capacity to spare, nothing added, nothing failing
AMPLE = replace(SMALL, added_per_hour=0, workers=4, visit_minutes=1, queue_limit=100, failing=0)


def test_a_run_is_deterministic() -> None:
    first = VisitSimulation(SMALL, "deadline").run()
    assert VisitSimulation(SMALL, "deadline").run() == first
    assert first["visits"] > 0 and first["origins"] == 40 + 2 * 11  # added at hours 1..11


def test_stop_after_success_visits_each_origin_once_and_every_first_visit_is_eventful() -> None:
    result = VisitSimulation(AMPLE, "stop_after_success").run()
    assert result["visits"] == result["eventful"] == 40
    assert result["never_visited"] == 0 and result["failed"] == 0


def test_the_lag_policy_alone_never_visits_an_origin_never_visited() -> None:
    """``already_visited_order_by_lag`` takes origins visited successfully
    whose forge changed since: on a new world, nothing."""
    result = VisitSimulation(AMPLE, "already_visited_order_by_lag").run()
    assert result["visits"] == 0 and result["never_visited"] == result["origins"]
    assert result["stale_share"] == 1.0


def test_a_world_that_never_changes_has_nothing_new_after_the_first_visits() -> None:
    still = replace(AMPLE, changes=(1e-9, 1e-9), days=1.5)
    result = VisitSimulation(still, "oldest_scheduled_first").run()
    # every origin again after its 12-hour cooldown: 40 first visits, then
    # visits that find nothing new
    assert result["eventful"] == 40 and result["visits"] > 80
    # stale only until each first visit: the hourly sample at 0 (40 origins
    # for an hour); all were visited within minutes
    assert result["stale_origin_hours"] == 40


def test_compare_checks_every_choice_before_running_any() -> None:
    with pytest.raises(InvalidInput, match="policy"):
        compare(SMALL, ["deadline", "newest_first"])
    with pytest.raises(InvalidInput, match="needs a lister"):
        compare(SMALL, ["first_visits_after_listing"])
    with pytest.raises(InvalidInput, match="failing"):
        replace(SMALL, failing=1.5)


def test_the_command_prints_one_row_per_policy() -> None:
    runner = CliRunner()
    args = ["scheduler", "simulate-visits", "--origins", "20", "--days", "0.2"]
    result = runner.invoke(swh, [*args, "--policy", "deadline", "--policy", "mix", "--json"])
    assert result.exit_code == 0, result.output
    assert [r["policy"] for r in json.loads(result.output)] == ["deadline", "mix"]
    table = runner.invoke(swh, [*args, "--policy", "stop_after_success"])
    assert table.exit_code == 0 and "stop_after_success" in table.output
    bad = runner.invoke(swh, [*args, "--policy", "newest_first"])
    assert bad.exit_code == 2 and "policy" in bad.stderr
