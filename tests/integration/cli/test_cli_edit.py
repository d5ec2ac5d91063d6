"""``swh scheduler task update`` and ``task-type update`` through click's
runner, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.store import SQLAlchemyStore


@pytest.fixture
def run(db_url: str) -> Any:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(swh, ["scheduler", "--db-url", db_url, *args])

    return invoke


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result.stdout  # a warning (arguments not checked) goes to stderr


def refused(result: Result, *fragments: str) -> str:
    """Exit code 2 and one line naming the problem."""
    assert result.exit_code == 2, (result.output, result.stderr)
    message = result.stderr.strip()
    assert "Traceback" not in result.output + result.stderr
    for fragment in fragments:
        assert fragment in message, message
    return message


@pytest.fixture
def task_id(run: Any) -> int:
    ok(run("task-type", "add", "sleep", "workers.sleep"))
    created = json.loads(
        ok(run("task", "add", "sleep", "duration=1", "--period", "1h", "--key", "nap", "--json"))
    )
    return int(created[0]["id"])


def test_task_update_changes_fields_and_times(run: Any, task_id: int) -> None:
    shown = ok(run("task", "update", str(task_id), "--period", "2h", "-P", "high", "duration=2"))
    lines = shown.splitlines()
    assert lines[0] == f"Task {task_id} updated"
    assert "  period: 1:00:00 -> 2:00:00" in lines
    assert "  priority: normal -> high" in lines
    assert "  kwargs: {'duration': 1} -> {'duration': 2}" in lines
    assert lines[1] == "Times in UTC"
    assert any(line.startswith("  latest start (deadline): ") for line in lines)
    edited = json.loads(
        ok(
            run(
                "task",
                "update",
                "--key",
                "nap",
                "--cron",
                "0 3 * * *",
                "--kind",
                "cron",
                "--tz",
                "Europe/Paris",
                "--json",
            )
        )
    )
    assert (edited["schedule_kind"], edited["cron"], edited["period"]) == (
        "cron",
        "0 3 * * *",
        None,
    )
    assert edited["tz"] == "Europe/Paris" and edited["id"] == task_id
    next_run = datetime.fromisoformat(edited["next_run"])
    assert next_run.astimezone(UTC).hour in (1, 2)  # 03:00 in Paris
    assert ok(run("task", "update", str(task_id), "--blackout", "none")) == (
        f"Task {task_id} unchanged\n"
    )


def test_task_update_refusals_exit_2_naming_the_field(run: Any, task_id: int, db_url: str) -> None:
    refused(run("task", "update", str(task_id), "--cooldown", "3h"), "cooldown", "period")
    refused(run("task", "update", str(task_id), "--tz", "Nowhere/Land"), "tz")
    refused(run("task", "update", str(task_id), "--period", "none"), "period", "required")
    refused(run("task", "update", str(task_id)), "nothing to change")
    refused(run("task", "update", "abc", "--period", "1h"), "not a task id")
    refused(run("task", "update", "999", "--period", "1h"), "no task 999")
    refused(run("task", "update", "--key", "nobody", "--period", "1h"), "nobody")
    store = SQLAlchemyStore.from_url(db_url)
    try:
        [claimed] = store.claim_ready_tasks("sleep", now=datetime.now(tz=UTC), limit=1)
        assert claimed.task_id == task_id
        refused(run("task", "update", str(task_id), "x=1"), "args", "holds task")
        shown = ok(run("task", "update", str(task_id), "--period", "3h"))
        assert "A run holds the task: the times after it use the new values." in shown
        [task] = store.get_tasks([task_id])
        assert task.kwargs == {"duration": 1} and task.period is not None
        assert task.period.total_seconds() == 3 * 3600
    finally:
        store.close()


def test_task_type_update(run: Any, task_id: int) -> None:
    shown = ok(
        run(
            "task-type",
            "update",
            "sleep",
            "--max-queue-length",
            "5",
            "--retry-delay",
            "1m",
            "--description",
            "naps",
        )
    )
    assert shown.splitlines()[0] == "Task type sleep updated"
    assert "  max_queue_length: 5" in shown and "  naps" in shown
    data = json.loads(
        ok(
            run(
                "task-type",
                "update",
                "sleep",
                "--max-queue-length",
                "none",
                "--uses-lease",
                "yes",
                "--json",
            )
        )
    )
    assert data["max_queue_length"] is None and data["uses_lease"] is True
    refused(run("task-type", "update", "sleep", "--retry-delay", "none"), "retry_delay")
    refused(run("task-type", "update", "sleep", "--backoff-factor", "0.5"), "backoff_factor")
    refused(run("task-type", "update", "nosuch", "--num-retries", "1"), "nosuch")
    refused(run("task-type", "update", "sleep"), "nothing to change")
    assert "'none' unsets" in ok(run("task-type", "update", "--help"))


def test_a_type_edit_that_would_break_tasks_is_refused_and_dry_run_says_how(run: Any) -> None:
    ok(run("task-type", "add", "nap", "workers.sleep", "--default-interval", "1h"))
    ok(run("task-type", "update", "nap", "--min-interval", "10m", "--max-interval", "1d"))
    ok(run("task-type", "update", "nap", "--backoff-factor", "2"))
    ok(run("task", "add", "nap", "--period", "5m", "n=1"))
    ok(run("task", "add", "nap", "--interval", "1h", "n=2"))
    # 2 retries: 5 min + 1 h, more than the 5-minute period and the 10-minute floor
    shown = ok(run("task-type", "update", "nap", "--num-retries", "2", "--dry-run"))
    assert "Task type nap: 2 tasks (live or disabled)" in shown
    assert "breaks 1 (e.g. task 1): period:" in shown
    assert "breaks 1 (e.g. task 2): min_interval:" in shown
    assert "Would be refused: num_retries:" in shown
    refused(run("task-type", "update", "nap", "--num-retries", "2"), "num_retries:", "task 1")
    assert '"num_retries": null' in ok(run("task-type", "list", "--json"))
    # a new adaptive task refused by the type names the type's setting, not --interval
    ok(run("task", "delete", "1", "2", "--yes"))
    ok(run("task-type", "update", "nap", "--num-retries", "2"))
    message = refused(run("task", "add", "nap", "--interval", "2h", "n=3"), "min_interval:")
    assert "whatever their interval" in message and "task-type update nap" in message


#: the webhook worker's other arguments
HOOK = ("payload={}", "idempotency_key=k")


def test_webhook_urls_follow_the_callback_rule_on_the_command_line(run: Any, db_url: str) -> None:
    """task add, task schedule and task update refuse a webhook task's url
    to a private place, in every spelling; callback_allow widens the rule."""
    ok(run("task-type", "add", "webhook", "swh_like_workers.webhook.post"))
    for url in ("http://127.0.0.1/x", "http://2130706433/x", "http://[64:ff9b::7f00:1]/x"):
        added = run("task", "add", "webhook", f"url={url}", *HOOK, "--period", "1h")
        refused(added, "kwargs.url")
    created = json.loads(
        ok(
            run(
                "task", "add", "webhook", "url=https://8.8.8.8/h", *HOOK, "--period", "1h", "--json"
            )
        )
    )
    task = str(created[0]["id"])
    refused(run("task", "update", task, "url=http://0177.0.0.1/x"), "kwargs.url")
    widened = ["scheduler", "--db-url", db_url, "--callback-allow", "127.0.0.0/8"]
    allowed = CliRunner().invoke(swh, [*widened, "task", "update", task, "url=http://127.1/x"])
    assert allowed.exit_code == 0, (allowed.output, allowed.stderr)
