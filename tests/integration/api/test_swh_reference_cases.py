"""swh-scheduler's own test cases for listers, listed origins, grab policies,
visit statistics, queue positions and metrics, run through its own client
against a real ``rpc-serve`` (``/swh/``), on SQLite and PostgreSQL.

The cases live in ``swh_reference_cases/`` (one script per area, run by the
reference's python: ``test_swh_rpc.py`` says where that environment comes
from); each names the reference test it stands for, and where ours differs
on purpose it checks our documented behaviour and names the document. A
database kind's scripts run once, against one server (the cases keep to
corners of their own), and each case is one test here, failing with the
case's traceback. Under xdist one worker runs them and the others read its
results (a file lock, the run's shared temporary folder).
"""

from __future__ import annotations

import ast
import fcntl
import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import services
from rpc_process import serving_process

HERE = Path(__file__).parent / "swh_reference_cases"
TOKEN = "swh-reference-cases-rw-0123456789"
#: run in this order: ``whole`` reads the whole database, so it goes first
AREAS = ("whole", "listers", "grabs", "stats")
Results = dict[str, dict[str, str | None]]


def cases_of(area: str) -> list[str]:
    """The names of the functions ``@case`` registers in ``AREA.py``."""
    tree = ast.parse((HERE / f"{area}.py").read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(d, ast.Name) and d.id == "case" for d in node.decorator_list)
    ]


#: cases that fail on a defect of ours not fixed yet: each must still fail
#: (strict), so that its fix is seen and the mark taken off
KNOWN_DEFECTS: dict[str, str] = {}


def params_of(area: str) -> list[Any]:
    """The area's cases as parameters, a known defect marked as one."""
    return [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_DEFECTS[name]))
        if name in KNOWN_DEFECTS
        else name
        for name in cases_of(area)
    ]


def _run_area(python: str, url: str, area: str) -> dict[str, str | None]:
    done = subprocess.run(
        [python, str(HERE / f"{area}.py"), url, TOKEN],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        failed = f"{area}.py exited {done.returncode}: {done.stderr[-3000:]}"
        return dict.fromkeys(cases_of(area), failed)
    found: dict[str, str | None] = json.loads(lines[-1])
    return found


def _run_areas(python: str, db_url: str, folder: Path) -> Results:
    """``whole`` first, alone; then the other areas at once (their cases
    keep to corners of their own, as several clients of one server would)."""
    # (no rate limit: three scripts at once make more than its default 100
    # requests a second with one token, and a 429 is not what they test)
    options = ("--tokens", f"{TOKEN}:rw", "--rate-limit", "0")
    with serving_process(db_url, folder, *options) as (_, port):
        url = f"http://127.0.0.1:{port}/swh/"
        results = {AREAS[0]: _run_area(python, url, AREAS[0])}
        with ThreadPoolExecutor(len(AREAS) - 1) as pool:
            running = {area: pool.submit(_run_area, python, url, area) for area in AREAS[1:]}
            results.update({area: future.result() for area, future in running.items()})
    return results


def _results_on(kind: str, request: pytest.FixtureRequest, python: str, folder: Path) -> Results:
    """The areas run on a fresh database of ``kind`` (dropped after)."""
    if kind == "sqlite":
        path = folder / "scheduler.sqlite"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return _run_areas(python, f"sqlite:///{path}", folder)
    databases = request.getfixturevalue("_databases")
    name, url = databases.take()
    try:
        return _run_areas(python, url, folder)
    finally:
        databases.drop(name)


@pytest.fixture(
    scope="session",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)],
)
def reference_cases(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Results:
    """Every area's results on one kind of database (run once per test run)."""
    from test_swh_rpc import REFERENCE, _reference_python

    kind: str = request.param
    python = services.require(REFERENCE, _reference_python)
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, every worker's parent
    cached = shared / f"swh-reference-cases-{kind}.json"
    with open(shared / f"swh-reference-cases-{kind}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cached.exists():
            folder = tmp_path_factory.mktemp(f"reference-cases-{kind}")
            results = _results_on(kind, request, python, folder)
            cached.write_text(json.dumps(results))
    found: Results = json.loads(cached.read_text())
    return found


def _check(results: Results, area: str, name: str) -> None:
    assert name in results[area], f"{area}.py did not run {name}: {sorted(results[area])}"
    failure = results[area][name]
    if failure is not None:
        pytest.fail(f"{area}.py::{name} failed through the reference's client:\n{failure}")


@pytest.mark.parametrize("name", params_of("whole"))
def test_the_whole_database_of_listed_origins_as_the_reference_checks_it(
    reference_cases: Results, name: str
) -> None:
    _check(reference_cases, "whole", name)


@pytest.mark.parametrize("name", params_of("listers"))
def test_listers_and_listed_origins_as_the_reference_checks_them(
    reference_cases: Results, name: str
) -> None:
    _check(reference_cases, "listers", name)


@pytest.mark.parametrize("name", params_of("grabs"))
def test_grab_next_visits_as_the_reference_checks_it(reference_cases: Results, name: str) -> None:
    _check(reference_cases, "grabs", name)


@pytest.mark.parametrize("name", params_of("stats"))
def test_visit_stats_positions_and_metrics_as_the_reference_checks_them(
    reference_cases: Results, name: str
) -> None:
    _check(reference_cases, "stats", name)


def test_each_area_names_its_cases_once_and_each_case_its_reference() -> None:
    """A case without its reference line, or a name given twice, fails here."""
    for area in AREAS:
        names = cases_of(area)
        assert len(names) == len(set(names)), area
        text = (HERE / f"{area}.py").read_text()
        for chunk in text.split("@case\n")[1:]:
            assert "# reference: test_scheduler.py::test_" in chunk.split("\n\n\n")[0], chunk[:80]


#: the reference's test functions of these areas (swh-scheduler 3.6.0's
#: test_scheduler.py and test_journal_client.py): each is named by a case
#: here or in tests/integration/recurrent/test_journal_reference_cases.py,
#: or in NOT_PORTED with why
REFERENCE_CASES = {
    "test_scheduler.py": """
        get_or_create_lister get_lister get_listers get_listers_with_first_visits_to_schedule
        get_listers_by_id update_lister update_lister_stale record_listed_origins
        record_listed_origins_with_duplicate record_listed_origins_upsert
        get_listed_origins_exact get_listed_origins_with_urls get_listed_origins_limit
        get_listed_origins_all get_listed_origins_with_enabled_parameter
        get_visit_types_for_listed_origins grab_next_visits_oldest_scheduled_first
        grab_next_visits_cooldowns grab_next_visits_tablesample
        grab_next_visits_never_visited_oldest_update_first
        grab_next_visits_already_visited_order_by_lag grab_next_visits_underflow
        grab_next_visits_no_last_update_nor_visit_stats
        grab_next_visits_no_last_update_with_visit_stats grab_next_visits_unknown_policy
        grab_next_visit_duplicates grab_next_visit_for_specific_lister
        origin_visit_stats_get_empty origin_visit_stats_get origin_visit_stats_upsert
        origin_visit_stats_upsert_with_snapshot origin_visit_stats_upsert_batch
        origin_visit_stats_upsert_same_url visit_scheduler_queue_position
        metrics_origins_known metrics_origins_enabled metrics_origins_never_visited
        metrics_origins_with_pending_changes update_metrics_explicit_lister
        update_metrics_explicit_timestamp update_metrics_twice get_metrics
        get_metrics_by_lister get_metrics_by_visit_type
    """,
    "test_journal_client.py": """
        journal_client_origin_visit_status_from_journal_fail max_date max_date_raise
        journal_client_origin_visit_status_from_journal_ignored_status
        journal_client_ignore_missing_type
        journal_client_origin_visit_status_from_journal_last_not_found
        journal_client_origin_visit_status_from_journal_last_failed
        journal_client_origin_visit_status_from_journal_last_failed2
        journal_client_origin_visit_status_from_journal_last_successful
        journal_client_origin_visit_status_from_journal_last_uneventful
        journal_client_origin_visit_status_permutation0
        journal_client_origin_visit_status_permutation1
        journal_client_origin_visit_status_after_grab_next_visits
        journal_client_origin_visit_status_duplicated_messages
        journal_client_origin_visit_status_several_upsert
        journal_client_origin_visit_statuses_same_snapshot_permutation
        journal_client_from_position_offset_to_days
        journal_client_from_position_offset_to_days_only_positive_input
        next_visit_queue_position next_visit_queue_position_with_state
        next_visit_queue_position_with_next_visit_queue disable_failing_origins
    """,
}
NOT_PORTED = {
    "test_max_date": "a helper of the reference's implementation (the latest of some dates); "
    "its rule, the latest visit wins, is the late-message and permutation cases'",
    "test_max_date_raise": "the same helper's refusal of no date at all",
    "test_journal_client_from_position_offset_to_days_only_positive_input": (
        "the precondition of the reference's helper (an offset is never negative); our "
        "interval() has none to check: it clamps to 0..10"
    ),
}


def test_every_reference_case_of_these_areas_is_ported_or_said_why() -> None:
    journal = Path(__file__).parents[1] / "recurrent" / "test_journal_reference_cases.py"
    texts = [(HERE / f"{area}.py").read_text() for area in AREAS] + [journal.read_text()]
    named = set(re.findall(r"::(test_\w+)", "\n".join(texts)))
    wanted = {f"test_{name}" for names in REFERENCE_CASES.values() for name in names.split()}
    assert len(wanted) == 66
    assert sorted(wanted - named - set(NOT_PORTED)) == []
    assert sorted((named | set(NOT_PORTED)) - wanted) == []
