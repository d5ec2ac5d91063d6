"""``swh scheduler task disable|enable|cancel|delete`` on a filter, through
click's runner, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)


@pytest.fixture
def run(db_url: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(swh, ["scheduler", "--db-url", db_url, *args], input=input)

    return invoke


@pytest.fixture
def tasks(store: SQLAlchemyStore, sleep_type: TaskType) -> Iterator[list[Task]]:
    """14 tasks: site/0..11 (``depth`` 0..2), an unkeyed one and one of
    another type; site/0 has been dispatched (an open run)."""
    store.create_task_type(sleep_type.updated(type="other"))
    now = datetime.now(UTC)

    def task(n: int, key: str | None, type: str = "sleep") -> Task:
        return Task(
            type=type,
            args=(n,),
            kwargs={"depth": n % 3},
            key=key,
            next_run=now - H,
            deadline=now,
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=H,
        )

    made = [task(n, f"site/{n}") for n in range(12)]
    made += [task(12, None), task(13, "site/x", "other")]
    created = store.create_tasks(made, now=now)
    store.claim_ready_tasks("sleep", now=now, limit=1)
    yield created


def statuses(store: SQLAlchemyStore) -> dict[int, str]:
    return {t.args[0]: t.status.value for t in store.search_tasks(limit=100)}


def test_no_filter_is_refused_unless_all(run, tasks, store) -> None:  # type: ignore[no-untyped-def]
    before = statuses(store)
    for args, fragments in [
        ((), ("--type, --kind, --status, --condition, --key-prefix or --arg-match", "--all")),
        (("3", "--type", "sleep"), ("ids or a filter (--type), not both",)),
        (("--type", "nosuch"), ("type: unknown task type 'nosuch'",)),
        (("--arg-match", "depth"), ("--arg-match: 'depth' is not NAME=VALUE",)),
        (("--key-prefix", ""), ("key_prefix: must be a non-empty text",)),
    ]:
        result = run("task", "disable", *args)
        assert result.exit_code == 2, result.output
        message = result.stderr.strip()
        assert len(message.splitlines()) == 1 and "Traceback" not in result.output
        for fragment in fragments:
            assert fragment in message, message
    result = run("task", "disable", "--condition", "FINE")
    assert result.exit_code == 2 and "--condition" in result.stderr
    assert statuses(store) == before
    result = run("task", "disable", "--all", "--dry-run")
    assert result.exit_code == 0 and "14 tasks (every task) would be disabled:" in result.output


def test_count_sample_then_confirmation(run, tasks, store) -> None:  # type: ignore[no-untyped-def]
    before = statuses(store)
    result = run("task", "disable", "--key-prefix", "site/", "-t", "sleep", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "12 tasks (type 'sleep', key starting with 'site/') would be disabled:"
    assert lines[1] == f"  Task {tasks[0].id} (sleep, scheduled, key site/0)"
    assert lines[2] == f"  Task {tasks[1].id} (sleep, waiting, key site/1)"
    assert lines[11:] == ["  ... and 2 more"]
    assert statuses(store) == before

    refused = run("task", "disable", "--key-prefix", "site/", "-t", "sleep", input="n\n")
    assert refused.exit_code == 1 and "Disable 12 tasks? [y/N]" in refused.stderr
    assert statuses(store) == before

    done = run("task", "disable", "--key-prefix", "site/", "--arg-match", "depth=1", input="y\n")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1] == "Disabled 5 tasks."
    after = statuses(store)
    assert {n for n, s in after.items() if s == "disabled"} == {1, 4, 7, 10, 13}  # both types


def test_json_and_yes_for_scripts(run, tasks, store) -> None:  # type: ignore[no-untyped-def]
    result = run("task", "cancel", "--arg-match", "0=12", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "action": "cancel",
        "filter": "argument 0=12",
        "matched": 1,
        "changed": 1,
        "held": 0,
        "sample": [tasks[12].id],
        "dry_run": False,
    }
    assert statuses(store)[12] == TaskStatus.CANCELLED.value
    counted = json.loads(ok(run("task", "enable", "--status", "cancelled", "--dry-run", "--json")))
    assert (counted["matched"], counted["dry_run"]) == (0, True)  # enable takes disabled tasks


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.stderr)
    return result.output


def test_delete_keeps_tasks_with_an_open_run(run, tasks, store) -> None:  # type: ignore[no-untyped-def]
    result = run("task", "delete", str(tasks[0].id), str(tasks[1].id), input="y\n")
    assert result.exit_code == 0, result.output
    assert "2 tasks (2 ids) would be deleted; 1 held (an open run: cancel them first):" in (
        result.output
    )
    assert "Deleted 1 task (1 left as they were: an open run: cancel them first)." in result.output
    assert 0 in statuses(store) and 1 not in statuses(store)
    ok(run("task", "cancel", str(tasks[0].id)))
    gone = ok(run("task", "delete", "--type", "sleep", "--status", "cancelled", "--yes"))
    assert gone.splitlines()[-1] == "Deleted 1 task."
    assert sorted(statuses(store)) == list(range(2, 14))


def test_condition_filter_and_enable(run, tasks, store) -> None:  # type: ignore[no-untyped-def]
    # every task is past its deadline with no good run: ERROR (the dispatched
    # one too); a fresh one of that type is not
    now = datetime.now(UTC)
    fresh = Task(
        type="sleep",
        args=(14,),
        next_run=now + H,
        deadline=now + 2 * H,
        schedule_kind=ScheduleKind.ADAPTIVE,
        current_interval=H,
    )
    store.create_tasks([fresh], now=now)
    result = ok(run("task", "disable", "--condition", "error", "--type", "sleep", "--yes"))
    assert result.splitlines()[-1] == "Disabled 13 tasks."
    found = statuses(store)
    assert (found[0], found[13], found[14]) == ("disabled", "waiting", "waiting")
    # disabled by an operator: WARNING
    back = ok(run("task", "enable", "--condition", "WARNING", "--yes"))
    assert back.splitlines()[-1] == "Enabled 13 tasks."
    assert set(statuses(store).values()) == {"waiting"}


@pytest.mark.parametrize("action", ["disable", "enable", "cancel", "delete"])
def test_a_dry_run_on_task_ids_changes_nothing(run, tasks, store, action) -> None:  # type: ignore[no-untyped-def]
    ids = [str(t.id) for t in tasks[3:5]]
    if action == "enable":
        store.disable_tasks([t.id for t in tasks[3:5]], now=datetime.now(UTC))
    before = statuses(store)
    result = run("task", action, *ids, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "2 tasks" in result.output and "would be" in result.output, result.output
    assert statuses(store) == before
    # without --dry-run, the same ids are acted on at once
    result = run("task", action, *ids, "--yes")
    assert result.exit_code == 0, result.output
    assert statuses(store) != before
