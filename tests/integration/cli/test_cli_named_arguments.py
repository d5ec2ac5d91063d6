"""Issue 57, item 7: a positional argument that is the name of one of the
worker's keyword parameters (``task add sleep duration``, a forgotten
``=0``) is refused at every door that reads arguments as text (``task
add``, ``task schedule``'s lines, ``task update``), naming it; nothing is
written. A type whose worker is not importable here is not checked by name:
its parameters are unknown, so nothing is guessed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.store import SQLAlchemyStore

HINT = "did you mean `duration=VALUE`?"


@pytest.fixture
def run(db_url: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(swh, ["scheduler", "--db-url", db_url, *args])

    return invoke


@pytest.fixture
def store(db_url: str, run):  # type: ignore[no-untyped-def]
    registered = run("task-type", "register")
    assert registered.exit_code == 0, registered.output
    opened = SQLAlchemyStore.from_url(db_url)
    yield opened
    opened.close()


def refused(result: Result) -> str:
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout == ""
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    return message


def test_add_refuses_a_parameter_name_given_as_a_positional_argument(  # type: ignore[no-untyped-def]
    run, store: SQLAlchemyStore
) -> None:
    message = refused(run("task", "add", "sleep", "--period", "1h", "duration"))
    assert message == (
        "error: arguments: positional argument 'duration' is the name of a parameter of "
        f"task type 'sleep': {HINT} (its worker is swh_like_workers.sleep.sleep("
        "duration=0.0, failure_rate=0.0, eventful_rate=1.0, cpu=False, seed=None)) "
        "(--no-check-args to accept them)"
    )
    # any parameter, at any position, whatever else is given
    assert "did you mean `seed=VALUE`?" in refused(run("task", "add", "sleep", "0.5", "seed"))
    assert HINT in refused(run("task", "add", "sleep", "duration", "duration=1"))
    assert store.count_tasks() == 0
    # a value is not a name; the name with its value is a keyword argument
    for good in (["0.5"], ["duration=0"], ["sleepy"]):
        added = run("task", "add", "sleep", "--period", "1h", *good)
        assert added.exit_code == 0 and added.stderr == "", (good, added.stderr)
    # the escape hatch stays
    forced = run("task", "add", "sleep", "duration", "--no-check-args")
    assert forced.exit_code == 0, forced.stderr
    assert store.count_tasks() == 4


def test_a_type_of_another_app_is_not_guessed_at(run, store: SQLAlchemyStore) -> None:  # type: ignore[no-untyped-def]
    ok = run("task-type", "add", "crawl", "elsewhere.tasks.crawl", "-i", "1h")
    assert ok.exit_code == 0, ok.output
    added = run("task", "add", "crawl", "duration")
    assert added.exit_code == 0, added.stderr
    assert "not checked" in added.stderr and "VALUE" not in added.stderr
    [task] = store.search_tasks(limit=10)
    assert list(task.args) == ["duration"]


def test_schedule_refuses_the_line_and_writes_nothing(  # type: ignore[no-untyped-def]
    run, store: SQLAlchemyStore, tmp_path: Path
) -> None:
    rows = tmp_path / "tasks.csv"
    rows.write_text('type,args,kwargs\nsleep,[1],{}\nsleep,"[""duration""]",{}\n')
    message = refused(run("task", "schedule", "-q", str(rows)))
    assert message.startswith(
        "error: line 3: arguments: positional argument 'duration' is the name of a "
        f"parameter of task type 'sleep': {HINT}"
    )
    assert store.count_tasks() == 0


def test_update_refuses_it_too(run, store: SQLAlchemyStore) -> None:  # type: ignore[no-untyped-def]
    added = run("task", "add", "sleep", "--period", "1h", "--key", "nap", "1")
    assert added.exit_code == 0, added.stderr
    assert HINT in refused(run("task", "update", "--key", "nap", "duration"))
    task = store.get_task_by_key("nap")
    assert task is not None and list(task.args) == [1]  # nothing written
