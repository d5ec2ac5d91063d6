"""The small traps of issue 31, each shut: an unknown ``start-runner -t``
type, a mistyped SQLite path on a read command, ``task respawn`` of no
task, the importer's JSON error position and progress total, Alembic's
preamble in every daemon's log, and ``--json`` where it was missing."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_cli import ok, refused

from swh_like_scheduler.cli import swh
from swh_like_scheduler.cli.task import _count_rows
from swh_like_scheduler.domain.model import TaskStatus
from swh_like_scheduler.store import SQLAlchemyStore, make_engine, migrations


def stdout(result: Result) -> str:
    """What the command printed on stdout (a warning goes to stderr), once it succeeded."""
    ok(result)
    return result.stdout


def invoke(db_url: str, *args: str) -> Result:
    return CliRunner().invoke(swh, ["scheduler", "--db-url", db_url, *args])


def test_start_runner_refuses_a_type_that_does_not_exist(db_url: str) -> None:
    ok(invoke(db_url, "task-type", "register"))
    result = invoke(db_url, "start-runner", "--once", "--no-monitor", "-t", "sleep", "-t", "nosuch")
    refused(result, "unknown task type 'nosuch'")
    # the same check as task add's
    refused(invoke(db_url, "task", "add", "nosuch"), "unknown task type 'nosuch'")


def test_a_mistyped_sqlite_path_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nosuchdir" / "x.db"
    url = f"sqlite:///{missing}"
    config = tmp_path / "config.toml"
    config.write_text(f'[scheduler]\ndb_url = "{url}"\n')
    for args in (
        ["--db-url", url, "task", "list"],
        ["--db-url", url, "task-type", "list"],
        ["--db-url", url, "db", "version"],
        ["--db-url", url, "task", "add", "sleep"],
        ["--db-url", url, "start-runner", "--once", "--no-monitor"],
        ["-C", str(config), "task", "list"],
    ):
        result = CliRunner().invoke(swh, ["scheduler", *args])
        message = refused(result, "db-url", str(missing), "swh scheduler db init")
        assert "does not exist" in message
        assert not missing.parent.exists(), args
    # db init creates it, and then the same read works
    assert "at revision" in ok(
        CliRunner().invoke(swh, ["scheduler", "--db-url", url, "db", "init"])
    )
    assert missing.exists()
    ok(CliRunner().invoke(swh, ["scheduler", "-C", str(config), "task", "list"]))


def test_acting_on_a_task_that_does_not_exist_is_one_error(db_url: str) -> None:
    ok(invoke(db_url, "task-type", "register"))
    ok(invoke(db_url, "task", "add", "sleep", "a"))
    result = invoke(db_url, "task", "respawn", "99999")
    assert refused(result) == "error: no task with id 99999"
    assert result.stdout == ""
    # with a task that exists: nothing is changed, and the error names the others
    for action in ("disable", "cancel", "respawn", "enable"):
        result = invoke(db_url, "task", action, "1", "99999", "424242")
        assert refused(result) == "error: no task with id 99999, 424242"
        assert result.stdout == ""
    store = SQLAlchemyStore.from_url(db_url)
    try:
        assert store.get_tasks([1])[0].status is TaskStatus.WAITING
    finally:
        store.close()


def test_the_importer_says_where_the_json_is_wrong(db_url: str, tmp_path: Path) -> None:
    ok(invoke(db_url, "task-type", "register"))
    cases = {
        '{"type": "sleep", "args": [1,]}': "line 1: json: not valid JSON (Expecting value at "
        "column 30)",
        '{"type": "sleep",': "at the end of the line)",
        '{"type": "sleep", "args": "[1,]"}': "args: '[1,]' is not valid JSON (Expecting value "
        "at character 4)",
    }
    for line, expected in cases.items():
        path = tmp_path / "bad.jsonl"
        path.write_text(line + "\n")
        message = refused(invoke(db_url, "task", "schedule", "-q", str(path)))
        assert expected in message, message
    # a byte order mark is no error
    path = tmp_path / "bom.jsonl"
    path.write_text('\ufeff{"type": "sleep", "args": [1]}\n', encoding="utf-8")
    assert "Created 1 task" in ok(invoke(db_url, "task", "schedule", str(path)))


def test_the_progress_bar_counts_task_lines(tmp_path: Path) -> None:
    csv = tmp_path / "tasks.csv"
    csv.write_text("type,args\n" + "".join(f"sleep,[{n}]\n" for n in range(1000)) + "\n")
    assert _count_rows(str(csv), header=True) == 1000  # was 1001 (the header)
    jsonl = tmp_path / "tasks.jsonl"
    jsonl.write_text('{"args": [1]}\n\n  \n{"args": [2]}')  # blank lines, no final newline
    assert _count_rows(str(jsonl), header=False) == 2
    assert _count_rows("-", header=False) is None


def test_no_alembic_preamble_in_the_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    engine = make_engine(url)
    try:
        with caplog.at_level(logging.INFO):
            migrations.upgrade(engine, "0007")
            migrations.upgrade(engine)
            assert migrations.is_current(engine)
        text = caplog.text
        assert "Running upgrade 0007 -> 0008" in text  # what a migration does stays
        assert "Context impl" not in text and "Will assume" not in text
    finally:
        engine.dispose()
    # a daemon, as run: start-runner logs at INFO to stderr
    swh_command = Path(sys.executable).with_name("swh")
    result = subprocess.run(
        [str(swh_command), "scheduler", "--db-url", url, "start-runner", "--once", "--no-monitor"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SWH_SCHEDULER_BROKER_URL": "memory://"},
    )
    assert result.returncode == 0, result.stderr
    assert "Context impl" not in result.stderr and "Will assume" not in result.stderr


def test_json_where_it_was_missing(db_url: str, tmp_path: Path) -> None:
    version = json.loads(stdout(invoke(db_url, "db", "version", "--json")))
    head = migrations.head_revision()
    assert version == {"database": head, "code": head, "current": True}
    registered = json.loads(stdout(invoke(db_url, "task-type", "register", "--json")))
    assert {r["task_type"]["type"] for r in registered} >= {"sleep", "notify"}
    assert all(r["created"] for r in registered)
    again = json.loads(stdout(invoke(db_url, "task-type", "register", "--json")))
    assert not any(r["created"] for r in again)
    [added] = json.loads(
        stdout(invoke(db_url, "task-type", "add", "crawl", "tasks.crawl", "-i", "1h", "--json"))
    )
    assert (added["type"], added["backend_name"], added["default_interval"]) == (
        "crawl",
        "tasks.crawl",
        3600.0,
    )
    lines = tmp_path / "tasks.jsonl"
    lines.write_text("".join(json.dumps({"type": "crawl", "args": [n]}) + "\n" for n in range(3)))
    counts = json.loads(stdout(invoke(db_url, "task", "schedule", "--json", str(lines))))
    assert (counts["created"], counts["existing"]) == (3, 0) and counts["seconds"] >= 0
    counts = json.loads(stdout(invoke(db_url, "task", "schedule", "--json", str(lines))))
    assert (counts["created"], counts["existing"]) == (0, 3)
