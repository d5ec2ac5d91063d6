"""``task add --period`` and ``task schedule`` give a periodic task the
default cooldown; ``--cooldown 0`` is kept; a zero interval or period is
refused naming the field (issue 31)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result
from test_cli import ok, refused

from swh_like_scheduler.cli import swh
from swh_like_scheduler.store import SQLAlchemyStore


def invoke(db_url: str, *args: str) -> Result:
    return CliRunner().invoke(swh, ["scheduler", "--db-url", db_url, *args])


def test_period_alone_gets_the_default_cooldown(db_url: str, tmp_path: Path) -> None:
    ok(invoke(db_url, "task-type", "register"))
    shown = ok(invoke(db_url, "task", "add", "sleep", "duration=0.2", "--period", "1h"))
    assert "Period: 1:00:00, cooldown 0:54:00" in shown
    [default] = json.loads(
        ok(invoke(db_url, "task", "add", "sleep", "seed=2", "--period", "1h", "--json"))
    )
    assert default["cooldown"] == 54 * 60
    [zero] = json.loads(
        ok(
            invoke(
                db_url,
                "task",
                "add",
                "sleep",
                "seed=3",
                "--period",
                "1h",
                "--cooldown",
                "0",
                "--json",
            )
        )
    )
    assert zero["cooldown"] == 0
    expected = ok(
        invoke(
            db_url, "task", "add", "sleep", "seed=4", "--period", "1h", "--expected-duration", "5m"
        )
    )
    assert "cooldown 0:44:00" in expected
    lines = tmp_path / "tasks.jsonl"
    lines.write_text(
        json.dumps({"type": "sleep", "args": [5], "period": "10 min"})
        + "\n"
        + json.dumps({"type": "sleep", "args": [6], "period": "10 min", "cooldown": 0})
        + "\n"
    )
    assert "Created 2 tasks" in ok(invoke(db_url, "task", "schedule", str(lines)))
    store = SQLAlchemyStore.from_url(db_url)
    try:
        cooldowns = {t.args: t.cooldown for t in store.search_tasks()}
    finally:
        store.close()
    assert cooldowns[(5,)] is not None and cooldowns[(5,)].total_seconds() == 540
    assert cooldowns[(6,)] is not None and cooldowns[(6,)].total_seconds() == 0


def test_zero_interval_and_period_are_refused(db_url: str, tmp_path: Path) -> None:
    ok(invoke(db_url, "task-type", "register"))
    refused(invoke(db_url, "task", "add", "sleep", "--interval", "0"), "interval", "zero")
    refused(invoke(db_url, "task", "add", "sleep", "--period", "0s"), "period", "zero")
    refused(invoke(db_url, "task", "add", "sleep", "--period", "-5"), "period", "longer than zero")
    refused(
        invoke(db_url, "task-type", "add", "t", "b", "--default-interval", "0"),
        "default_interval",
    )
    lines = tmp_path / "bad.jsonl"
    lines.write_text(
        json.dumps({"type": "sleep", "args": [1], "interval": "2h"})
        + "\n"
        + json.dumps({"type": "sleep", "args": [2], "interval": "0"})
        + "\n"
    )
    result = invoke(db_url, "task", "schedule", str(lines))
    assert result.exit_code == 2, result.output
    assert "interval" in result.stderr and "line 2" in result.stderr
    store = SQLAlchemyStore.from_url(db_url)
    try:
        assert store.count_tasks() == 0  # nothing half-written
    finally:
        store.close()
