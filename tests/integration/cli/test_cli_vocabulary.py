"""One vocabulary on the command line: the same filter flags on every
command that filters (old spellings hidden but kept), ``task update``
merging keyword arguments, and field errors (exit 2) for the small traps."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh


@pytest.fixture
def run(db_url: str) -> Any:
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(swh, ["scheduler", "--db-url", db_url, *args], input=input)

    return invoke


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result.stdout


def refused(result: Result, *fragments: str) -> str:
    assert result.exit_code == 2, (result.output, result.stderr, result.exception)
    message = result.stderr.strip()
    assert "Traceback" not in result.output and len(message.splitlines()) == 1, message
    for fragment in fragments:
        assert fragment in message, message
    return message


@pytest.fixture
def tasks(run: Any) -> dict[str, int]:
    ok(run("task-type", "add", "nap", "workers.sleep", "--default-interval", "1h"))
    ok(run("task-type", "add", "ping", "workers.ping"))
    made = {}
    for name, args in (
        ("nap-periodic", ["nap", "--period", "1h", "--key", "site/a", "n=1", "failure_rate=0.5"]),
        ("nap-adaptive", ["nap", "--interval", "2h", "--key", "site/b", "n=2"]),
        ("ping-cron", ["ping", "--cron", "0 3 * * *", "--key", "other/c", "n=3"]),
    ):
        [created] = json.loads(ok(run("task", "add", *args, "--no-check-args", "--json")))
        made[name] = int(created["id"])
    return made


def ids(output: str) -> set[int]:
    return {int(t["id"]) for t in json.loads(output)}


def test_the_same_filter_flags_on_list_status_and_bulk(run: Any, tasks: dict[str, int]) -> None:
    naps = {tasks["nap-periodic"], tasks["nap-adaptive"]}
    assert ids(ok(run("task", "list", "--type", "nap", "--json"))) == naps
    assert ids(ok(run("task", "list", "-t", "nap", "--json"))) == naps
    # the old spelling still works, hidden from the help
    assert ids(ok(run("task", "list", "--task-type", "nap", "--json"))) == naps
    assert "--task-type" not in ok(run("task", "list", "--help"))
    assert ids(ok(run("task", "list", "--kind", "cron", "--json"))) == {tasks["ping-cron"]}
    assert ids(ok(run("task", "list", "--key-prefix", "site/", "--status", "waiting", "--json")))
    # every task here is new: OK
    assert ids(ok(run("task", "list", "--condition", "ok", "--json"))) == set(tasks.values())
    assert ids(ok(run("task", "list", "--condition", "ERROR", "--json"))) == set()
    counted = json.loads(ok(run("task", "status", "--kind", "periodic", "--json")))
    assert counted["counts"] == {"nap": {"OK": 1, "WARNING": 0, "ERROR": 0}}
    counted = json.loads(ok(run("task", "status", "--type", "ping", "--json")))
    assert set(counted["counts"]) == {"ping"}
    # bulk actions take --kind too
    dry = json.loads(ok(run("task", "disable", "--kind", "adaptive", "--dry-run", "--json")))
    assert dry["matched"] == 1, dry
    assert "--kind" in ok(run("task", "disable", "--help"))
    for words in (["index", "status"], ["task-type", "list"], ["task", "schedule"]):
        shown = ok(run(*words, "--help"))
        assert "-t, --type" in shown and "--task-type" not in shown, words
    assert ok(run("task-type", "list", "--task-type", "ping")).strip() == "Known task types:\nping"


def test_task_update_merges_keyword_arguments_unless_told_to_replace(
    run: Any, tasks: dict[str, int]
) -> None:
    task = str(tasks["nap-periodic"])
    ok(run("task", "update", task, "n=5", "--no-check-args"))
    [shown] = json.loads(ok(run("task", "list", "-i", task, "--json")))
    assert shown["kwargs"] == {"n": 5, "failure_rate": 0.5}
    ok(run("task", "update", task, "n=6", "--replace-arguments", "--no-check-args"))
    [shown] = json.loads(ok(run("task", "list", "-i", task, "--json")))
    assert shown["kwargs"] == {"n": 6} and shown["args"] == []
    refused(run("task", "update", task, "--replace-arguments"), "replace-arguments:")


@pytest.mark.parametrize("interval", ["-5", "0"])
def test_a_duration_that_must_be_positive_says_so_for_zero_and_negatives(
    run: Any, tasks: dict[str, int], interval: str
) -> None:
    refused(
        run("task", "add", "nap", "--interval", interval, "n=9", "--no-check-args"),
        "interval:",
        "longer than zero",
    )
    refused(run("task", "update", str(tasks["nap-adaptive"]), "--interval", interval), "longer")
    refused(run("task-type", "update", "nap", "--min-interval", interval), "min_interval:")


def test_an_empty_key_and_a_nan_argument_are_field_errors(run: Any, tasks: dict[str, int]) -> None:
    refused(run("task", "add", "nap", "--period", "1h", "--key", "", "n=1"), "key:", "empty")
    refused(run("task", "add", "nap", "--period", "1h", "--key", "  ", "n=1"), "key:")
    for value in ("NaN", "Infinity", "-Infinity"):
        refused(
            run("task", "add", "nap", "--period", "1h", f"duration={value}", "--no-check-args"),
            "arguments:",
            "NaN and infinities",
        )
    assert len(json.loads(ok(run("task", "list", "--json")))) == len(tasks)
