"""Why, in words (issue 31, item 6): ``task runs`` shows the errors and the
total, ``task explain`` the last failure and the retry policy's next step,
``task status --show LEVEL`` exactly that level, the most late first, with
how many more; ``task add`` / ``task schedule`` check the arguments against
the worker's signature. On SQLite and PostgreSQL, with the runs ended by the
listener's own outcome policy."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.health import conditions
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
S = timedelta(seconds=1)
#: what the demo's workers said of every run of a task given ``n=1``
TYPE_ERROR = "TypeError(\"sleep() got an unexpected keyword argument 'n'\")"


@pytest.fixture
def run(db_url: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(swh, ["scheduler", "--db-url", db_url, *args], input=input, env=env)

    return invoke


def second(instant: datetime) -> str:
    """An instant as the explanation writes it (to the second, in UTC)."""
    return instant.replace(microsecond=0).isoformat(sep=" ")


def celery(store: SQLAlchemyStore, task_id: int) -> str:
    """The start of the Celery id of the task's latest run, as people read it."""
    return store.get_task_runs(task_id, limit=1)[0].backend_id[:8] + "\u2026"


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result.output


@pytest.fixture
def store(db_url: str, run):  # type: ignore[no-untyped-def]
    ok(run("task-type", "register"))
    opened = SQLAlchemyStore.from_url(db_url)
    yield opened
    opened.close()


def fail_runs(
    store: SQLAlchemyStore, task_id: int, count: int, start: datetime, errors: list[str]
) -> datetime:
    """Dispatch, start and fail ``count`` runs of the task, each as soon as
    the task allows, the listener's outcome policy applied; the ``errors``
    in turn. Returns the end of the last one."""
    apply = outcome_applier(TaskTypeCache(store), random.Random(0))
    at = start
    for n in range(count):
        [task] = store.get_tasks([task_id])
        at = max(at, task.next_run)
        [claimed] = store.claim_ready_tasks(task.type, now=at, limit=1)
        store.start_task_run(claimed.backend_id, started=at, worker="w1")
        at += S
        store.end_task_run(
            claimed.backend_id,
            status=RunStatus.FAILED,
            ended=at,
            error=errors[n % len(errors)],
            apply=apply,
        )
    return at


def periodic_failing(store: SQLAlchemyStore, start: datetime, count: int = 36) -> datetime:
    """The demo's task: ``sleep n=1 --period 1h`` whose runs all fail."""
    task = Task(
        type="sleep",
        kwargs={"n": 1},
        schedule_kind=ScheduleKind.PERIODIC,
        period=H,
        next_run=start,
        deadline=start + H,
    )
    store.create_tasks([task], now=start)
    return fail_runs(store, 1, count, start, [TYPE_ERROR])


# -- task runs -----------------------------------------------------------------


def test_runs_show_errors_and_the_total(run, store: SQLAlchemyStore) -> None:  # type: ignore[no-untyped-def]
    start = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
    periodic_failing(store, start)
    out = ok(run("task", "runs", "1")).splitlines()
    assert out[0] == "Found 20 of 36 runs of task 1, newest first (--limit 36 lists them all)"
    assert out[1] == "Times in UTC"
    assert out[2].split()[:2] == ["RUN", "CELERY"] and out[2].split()[-1] == "ERROR"
    assert len(out) == 23
    # each run's error, in the column that starts where the header's does
    column = out[2].index("ERROR")
    assert all(line[column:] == TYPE_ERROR for line in out[3:]), out[3]
    listed = [int(line.split()[0]) for line in out[3:]]
    assert listed == list(range(36, 16, -1))  # newest first
    everything = ok(run("task", "runs", "1", "--limit", "50")).splitlines()
    assert everything[0] == "Found 36 runs of task 1" and len(everything) == 39
    [latest] = json.loads(ok(run("task", "runs", "1", "--limit", "1", "--json")))
    assert (latest["id"], latest["status"], latest["error"]) == (36, "failed", TYPE_ERROR)


def test_runs_cut_a_long_error_and_full_shows_it_all(run, store: SQLAlchemyStore) -> None:  # type: ignore[no-untyped-def]
    start = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
    periodic_failing(store, start, count=0)
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/srv/worker/tasks.py", line 12, in crawl\n'
        "    fetch(url)\n"
        "ConnectionError: " + "the origin at https://example.org/ refused us " * 10
    )
    fail_runs(store, 1, 2, start, ["first line\nsecond line", traceback])
    out = ok(run("task", "runs", "1", env={"COLUMNS": "80"})).splitlines()
    column = out[2].index("ERROR")
    newest, older = out[3][column:], out[4][column:]
    # a traceback shows its exception, cut to the column's narrowest width
    assert newest.startswith("ConnectionError: the origin") and newest.endswith("\u2026")
    assert len(newest) == 60
    assert older == "first line \u2026"  # more lines follow
    wide = ok(run("task", "runs", "1", env={"COLUMNS": "400"})).splitlines()
    assert len(wide[3][column:]) == 400 - 1 - column
    full = ok(run("task", "runs", "1", "--full")).splitlines()
    assert full[3][column:] == "Traceback (most recent call last):"
    assert full[4:7] == [
        '      File "/srv/worker/tasks.py", line 12, in crawl',  # its own indent kept
        "        fetch(url)",
        "    ConnectionError: " + ("the origin at https://example.org/ refused us " * 10).rstrip(),
    ]
    assert full[7][column:] == "first line" and full[8] == "    second line"


# -- task explain ----------------------------------------------------------------


def test_explain_says_every_run_failed_with_what_and_what_comes_next(  # type: ignore[no-untyped-def]
    run, store: SQLAlchemyStore
) -> None:
    start = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
    ended = periodic_failing(store, start)
    at = (ended + 10 * 60 * S).isoformat()
    text = ok(run("task", "explain", "1", "--at", at)).splitlines()
    condition = next(line for line in text if line.startswith("Condition:"))
    assert condition.startswith(
        "Condition: ERROR (never_run) - The task never ran successfully: the last 36 runs "
        f"failed (the latest ended at {ended.replace(microsecond=0).isoformat(sep=' ')}); "
        "its first promise"
    )
    failure = next(line for line in text if line.startswith("Last failure:"))
    assert failure == (
        f"Last failure: run 36 (celery id {celery(store, 1)}), failed, ended {second(ended)} "
        f"(10m ago): {TYPE_ERROR}"
    )
    retries = next(line for line in text if line.startswith("Retries:"))
    [task] = store.get_tasks([1])
    assert retries == (
        "Retries: no retries (task type 'sleep' has num_retries 0): after 36 consecutive "
        f"failures it waits for its next regular run, from {second(task.next_run)}"
    )
    data = json.loads(ok(run("task", "explain", "1", "--at", at, "--json")))
    assert data["last_failure"]["run_id"] == 36 and data["last_failure"]["error"] == TYPE_ERROR
    assert data["retry"]["state"] == "no_retries"
    assert data["retry"]["next_attempt"] == task.next_run.isoformat()
    assert data["condition"]["reason"] == "never_run"


def test_explain_follows_a_one_shot_through_its_retries(  # type: ignore[no-untyped-def]
    run, store: SQLAlchemyStore
) -> None:
    store.create_task_type(
        TaskType(
            type="remind",
            backend_name="swh_like_workers.sleep.sleep",
            num_retries=3,
            retry_delay=timedelta(minutes=5),
            retry_growth=2.0,
            retry_jitter=timedelta(0),
        )
    )
    start = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
    [task] = store.create_tasks(
        [
            Task(
                type="remind",
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=start,
                deadline=start + H,
                max_delay=H,
            )
        ],
        now=start - H,
    )
    ended = fail_runs(store, task.id or 0, 1, start, ["boom"])

    def explained(at: datetime) -> dict:  # type: ignore[type-arg]
        answer = run("task", "explain", str(task.id), "--at", at.isoformat(), "--json")
        return json.loads(ok(answer))  # type: ignore[no-any-return]

    first = explained(ended)
    retry_at = ended + timedelta(minutes=5)
    assert first["retry"] == {
        "state": "retrying",
        "retries": 3,
        "retries_left": 2,
        "retry": 1,
        "next_attempt": retry_at.isoformat(),
        "detail": f"retry 1 of 3 after 1 consecutive failure, from {retry_at.isoformat()}; "
        "2 more retries if it fails",
    }
    ended = fail_runs(store, task.id or 0, 2, ended, ["boom"])
    third = explained(ended)["retry"]
    assert third["retry"] == 3 and third["detail"].endswith(
        "if it fails, the task is disabled (after 4 failures)"
    )
    ended = fail_runs(store, task.id or 0, 1, ended, ["boom at last"])
    gave_up = explained(ended)
    assert gave_up["condition"]["reason"] == "gave_up"
    assert gave_up["retry"]["state"] == "gave_up"
    assert gave_up["retry"]["detail"] == (
        f"disabled after 4 consecutive failures (its 3 retries used up); nothing runs "
        f"until `task respawn {task.id}`"
    )
    text = ok(run("task", "explain", str(task.id), "--at", ended.isoformat()))
    assert (
        f"Last failure: run 4 (celery id {celery(store, task.id or 0)}), failed, ended "
        f"{second(ended)} (now): boom at last"
    ) in text


# -- task status -------------------------------------------------------------


def problems(store: SQLAlchemyStore, now: datetime) -> None:
    """25 tasks in ERROR first (ids 1-25, the latest last: stale by 2 to
    26 hours), then 3 in WARNING (ids 26-28: due in 1 h, 30 min, 1h30)."""
    store.create_task_type(TaskType(type="crawl", backend_name="crawl"))
    errors = [
        Task(
            type="crawl",
            args=(k,),
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=H,
            next_run=now - (2 + k) * H,
            deadline=now - (1 + k) * H,
        )
        for k in range(1, 26)
    ]
    warnings = [
        Task(
            type="crawl",
            args=(f"w{n}",),
            schedule_kind=ScheduleKind.PERIODIC,
            period=24 * H,
            next_run=now - 20 * H,
            deadline=now + H,
            last_good_start_at=now - ago,
            last_good_end_at=now - ago + 60 * S,
            last_start_at=now - ago,
            last_end_at=now - ago + 60 * S,
            average_good_duration=2 * H,
        )
        for n, ago in enumerate((23 * H, 23 * H + 30 * 60 * S, 22 * H + 30 * 60 * S))
    ]
    store.create_tasks([*errors, *warnings], now=now - 30 * H)


def test_status_shows_exactly_the_level_asked_most_late_first(  # type: ignore[no-untyped-def]
    run, store: SQLAlchemyStore
) -> None:
    problems(store, datetime.now(tz=UTC))
    out = ok(run("task", "status", "--show", "WARNING", "--limit", "2")).splitlines()
    assert out[:2] == [
        f"{'TYPE':<24} {'OK':>9} {'WARNING':>9} {'ERROR':>9}",
        f"{'crawl':<24} {0:>9} {3:>9} {25:>9}",
    ]
    assert out[3:5] == ["Tasks in WARNING (3 in all), the most late first:", "Times in UTC"]
    listed = out[5:]
    assert [line.split()[1] for line in listed[:2]] == ["27", "26"]
    assert listed[0].startswith("Task 27 (crawl): WARNING likely_late (due in 2") and (
        "(due in 29m" in listed[0] or "(due in 30m" in listed[0]
    )
    assert listed[2] == "... and 1 more (--limit 3 lists them all)"
    assert len(listed) == 3
    data = json.loads(ok(run("task", "status", "--show", "WARNING", "--json")))
    assert [t["id"] for t in data["tasks"]] == [27, 26, 28]
    assert (data["matched"], data["more"], data["show"], data["at_least"]) == (
        3,
        0,
        "WARNING",
        False,
    )
    assert all(-5400 <= t["late_seconds"] < -1700 for t in data["tasks"])


def test_status_at_least_lists_the_worst_first_and_counts_the_rest(  # type: ignore[no-untyped-def]
    run, store: SQLAlchemyStore
) -> None:
    problems(store, datetime.now(tz=UTC))
    out = ok(run("task", "status", "--show", "WARNING", "--at-least", "-l", "3")).splitlines()
    assert out[3] == "Tasks in WARNING or worse (28 in all), worst first, then the most late:"
    assert out[4] == "Times in UTC"
    assert [line.split()[1] for line in out[5:8]] == ["25", "24", "23"]
    assert out[5].startswith("Task 25 (crawl): ERROR never_run (1d2h late) - ")
    assert out[8] == "... and 25 more (--limit 28 lists them all)"
    data = json.loads(ok(run("task", "status", "--show", "ERROR", "--json", "-l", "30")))
    assert [t["id"] for t in data["tasks"]] == list(range(25, 0, -1))
    assert data["more"] == 0
    # in any case, as --condition takes it
    lower = json.loads(ok(run("task", "status", "--show", "error", "--json", "-l", "30")))
    assert [t["id"] for t in lower["tasks"]] == [t["id"] for t in data["tasks"]]
    assert lower["show"] == "ERROR"
    none = ok(run("task", "status", "--show", "OK"))
    assert none.splitlines()[-1] == "No task in OK."
    bad = run("task", "status", "--at-least")
    assert bad.exit_code == 2 and "--at-least needs --show LEVEL" in bad.stderr


def test_status_keeps_the_latest_while_reading_pages(
    store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounded memory: with pages of 4 tasks and a limit of 2, the worst
    seen so far are kept, page after page, and the count is exact."""
    now = datetime.now(tz=UTC)
    problems(store, now)
    monkeypatch.setattr(conditions, "PAGE", 4)
    summary = conditions.summarise(store, now, show="ERROR", limit=2)
    assert [(e.task.id, e.late) for e in summary.tasks] == [(25, 26 * 3600.0), (24, 25 * 3600.0)]
    assert summary.matched == 25 and summary.counts["crawl"] == {
        "OK": 0,
        "WARNING": 3,
        "ERROR": 25,
    }


# -- arguments against the worker's signature ------------------------------------


def test_add_refuses_arguments_the_worker_does_not_take(  # type: ignore[no-untyped-def]
    run, store: SQLAlchemyStore
) -> None:
    refused = run("task", "add", "sleep", "n=1", "--period", "1h")
    assert refused.exit_code == 2, refused.output
    message = refused.stderr.strip()
    assert message == (
        "error: arguments: got an unexpected keyword argument 'n' for task type 'sleep', "
        "whose worker is swh_like_workers.sleep.sleep(duration=0.0, failure_rate=0.0, "
        "eventful_rate=1.0, cpu=False, seed=None) (--no-check-args to accept them)"
    )
    assert store.count_tasks() == 0
    too_many = run("task", "add", "sleep", "1", "0", "1", "true", "7", "extra")
    assert too_many.exit_code == 2 and "too many positional arguments" in too_many.stderr
    missing = run("task", "add", "notify", "queue=q")
    assert missing.exit_code == 2 and "missing a required argument: 'payload'" in missing.stderr
    assert store.count_tasks() == 0
    good = run("task", "add", "sleep", "0.5", "seed=3")
    assert good.exit_code == 0 and good.stderr == "", good.stderr
    forced = run("task", "add", "sleep", "n=1", "--no-check-args")
    assert forced.exit_code == 0 and forced.stderr == ""
    assert store.count_tasks() == 2


def test_update_refuses_arguments_the_worker_does_not_take(  # type: ignore[no-untyped-def]
    run, store: SQLAlchemyStore
) -> None:
    ok(run("task", "add", "sleep", "duration=1", "--period", "1h", "--key", "nap"))
    refused = run("task", "update", "--key", "nap", "n=1")
    assert refused.exit_code == 2, refused.output
    assert "unexpected keyword argument 'n' for task type 'sleep'" in refused.stderr
    assert "--no-check-args" in refused.stderr
    task = store.get_task_by_key("nap")
    assert task is not None and dict(task.kwargs) == {"duration": 1}  # nothing written
    changed = run("task", "update", "--key", "nap", "duration=2")
    assert changed.exit_code == 0 and changed.stderr == "", changed.stderr
    forced = run("task", "update", "--key", "nap", "n=1", "--no-check-args")
    assert forced.exit_code == 0, forced.stderr
    task = store.get_task_by_key("nap")
    assert task is not None and dict(task.kwargs) == {"duration": 2, "n": 1}  # merged


def test_a_worker_not_importable_here_is_a_warning(run, store: SQLAlchemyStore) -> None:  # type: ignore[no-untyped-def]
    ok(run("task-type", "add", "crawl", "elsewhere.tasks.crawl", "-i", "1h"))
    added = run("task", "add", "crawl", "anything=1")
    assert added.exit_code == 0, added.stderr
    assert added.stderr.strip() == (
        "warning: arguments of task type 'crawl' not checked: its Celery task "
        "'elsewhere.tasks.crawl' is not importable here"
    )
    assert store.count_tasks() == 1


def test_schedule_refuses_the_line_whose_arguments_do_not_fit(  # type: ignore[no-untyped-def]
    run, store: SQLAlchemyStore, tmp_path: Path
) -> None:
    rows = tmp_path / "tasks.csv"
    rows.write_text(
        "type,args,kwargs\n"
        'sleep,[1],"{""seed"": 1}"\n'
        'sleep,[2],"{""n"": 2}"\n'
        'crawl,[],"{""x"": 1}"\n'
        'crawl,[],"{""y"": 1}"\n'
    )
    ok(run("task-type", "add", "crawl", "elsewhere.tasks.crawl", "-i", "1h"))
    refused = run("task", "schedule", "-q", str(rows))
    assert refused.exit_code == 2
    assert refused.stderr.strip().startswith(
        "error: line 3: arguments: got an unexpected keyword argument 'n' for task type 'sleep'"
    )
    assert store.count_tasks() == 0  # nothing written
    forced = run("task", "schedule", "-q", "--no-check-args", str(rows))
    assert "Created 4 tasks" in ok(forced)
    rows.write_text("type,args,kwargs\n" + 'crawl,[],"{""x"": 2}"\n' * 3)
    warned = run("task", "schedule", "-q", str(rows))
    assert "Created 1 task" in ok(warned)  # three identical rows: one task
    # one warning for the type, not one per line
    assert warned.stderr.count("warning: arguments of task type 'crawl' not checked") == 1


def test_looking_up_the_worker_builds_no_current_celery_app() -> None:
    """Importing the worker packages and reading their tasks leaves Celery's
    current and default apps unset: nothing is configured, nothing connects."""
    code = (
        "import celery._state as state\n"
        "from swh_like_scheduler.intake.argcheck import load_worker_tasks\n"
        "found = load_worker_tasks()\n"
        "assert 'swh_like_workers.sleep.sleep' in found.runs, found\n"
        "assert found.problems == (), found.problems\n"
        "assert state.default_app is None, state.default_app\n"
        "assert getattr(state._tls, 'current_app', None) is None\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ)
    )
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
