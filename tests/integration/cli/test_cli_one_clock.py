"""Issue 57, items 5 and 6: one clock and one vocabulary in the human output
of ``task …`` commands, and a daily ``task list`` (one line per task, how
many match when the list is cut, the condition's reason with --condition).

Before: ``task explain`` of a task in Europe/Paris printed ``+02:00`` and
``+00:00`` lines, said "Can start by" / "Should start by" where ``task
list`` said "Next run" / "Deadline", named a run "run 216" without its
Celery id; ``task list`` printed a block of 14 lines per task under "Found
100 tasks", with no total, and --condition said nothing of the condition."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import BlackoutPeriod, ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)
#: an offset written after an instant (``+02:00``)
OFFSET = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?([+-]\d\d:\d\d)")
#: an instant in ISO 8601's T form (the JSON's, and before: explain's)
T_FORM = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


@pytest.fixture
def run(db_url: str) -> Any:
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(swh, ["scheduler", "--db-url", db_url, *args], env=env)

    return invoke


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result.stdout


def offsets(text: str) -> set[str]:
    return set(OFFSET.findall(text))


@pytest.fixture
def paris(db_url: str) -> dict[str, int]:
    """A cron task and a task with a blackout window, both in Europe/Paris,
    the cron one with a failed run."""
    store = SQLAlchemyStore.from_url(db_url)
    try:
        store.create_task_type(TaskType(type="crawl", backend_name="crawl"))
        cron = Task(
            type="crawl",
            args=("cron",),
            schedule_kind=ScheduleKind.CRON,
            cron="0 3 * * *",
            cron_max_duration=4 * H,
            tz="Europe/Paris",
            key="beat:proj.tasks.cleanup-every-night-in-the-paris-office",
            next_run=NOW - 33 * H,
            deadline=NOW - 29 * H,
            last_good_start_at=NOW - 57 * H,
            last_good_end_at=NOW - 56 * H,
        )
        blackout = Task(
            type="crawl",
            args=("blackout",),
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=H,
            next_run=NOW - H,
            deadline=NOW,
            blackout_periods=(BlackoutPeriod.parse({"start": "13:00", "end": "15:30"}),),
            tz="Europe/Paris",
        )
        made = store.create_tasks([cron, blackout], now=NOW - 60 * H)
        ran = store.schedule_task_run(made[0].id or 0, now=NOW - 3 * H)
        store.end_task_run(ran.backend_id, status="failed", ended=NOW - 2 * H, error="boom")
        return {"cron": made[0].id or 0, "blackout": made[1].id or 0, "run": ran.id or 0}
    finally:
        store.close()


def test_explain_of_a_paris_task_uses_one_zone_named_on_its_first_line(
    run: Any, paris: dict[str, int]
) -> None:
    for name in ("cron", "blackout"):
        text = ok(run("task", "explain", str(paris[name]), "--at", NOW.isoformat()))
        lines = text.splitlines()
        assert lines[0] == "Times in UTC"
        assert offsets(text) == {"+00:00"}, text
        assert not T_FORM.search(text), text
        assert any(line.startswith("Earliest start:  2026-") for line in lines)
        assert any(line.startswith("Latest start:    2026-") for line in lines)
        assert "Can start by" not in text and "Should start by" not in text
        paris_text = ok(
            run(
                "task", "explain", str(paris[name]), "--at", NOW.isoformat(), "--tz", "Europe/Paris"
            )
        )
        assert paris_text.splitlines()[0] == "Times in Europe/Paris"
        assert offsets(paris_text) == {"+02:00"}, paris_text  # summer time
    # the blackout's window is the task's own wall clock, said as such
    blackout = ok(run("task", "explain", str(paris["blackout"]), "--at", NOW.isoformat()))
    assert "(13:00 in Europe/Paris) falls in the blackout window 13:00:00-15:30:00" in blackout
    # the condition said 2026-06-14 03:00:00+02:00 (Paris) among +00:00 lines
    cron = ok(run("task", "explain", str(paris["cron"]), "--at", NOW.isoformat()))
    assert "The firing at 2026-06-14 01:00:00+00:00 should have finished" in cron
    # JSON: ISO 8601 UTC, as before
    data = json.loads(
        ok(run("task", "explain", str(paris["cron"]), "--at", NOW.isoformat(), "--json"))
    )
    assert T_FORM.match(data["can_start_by"]) and data["can_start_by"].endswith("+00:00")
    assert data["condition"]["detail"].startswith("The firing at 2026-06-14 03:00:00+02:00")


def test_a_run_is_its_number_with_its_celery_id_beside(run: Any, paris: dict[str, int]) -> None:
    text = ok(run("task", "explain", str(paris["cron"]), "--at", NOW.isoformat()))
    failure = next(line for line in text.splitlines() if line.startswith("Last failure:"))
    assert re.match(
        rf"Last failure: run {paris['run']} \(celery id [0-9a-f]{{8}}\u2026\), failed, ended "
        r"2026-06-15 10:00:00\+00:00 \(2h ago\): boom$",
        failure,
    ), failure
    runs = ok(run("task", "runs", str(paris["cron"]), "--tz", "Asia/Tokyo")).splitlines()
    assert runs[1] == "Times in Asia/Tokyo"
    assert runs[2].split()[:3] == ["RUN", "CELERY", "ID"]
    assert runs[3].split()[0] == str(paris["run"]) and "+09:00" in runs[3]


@pytest.mark.parametrize(
    "words",
    [
        ("task", "explain", "1"),
        ("task", "list"),
        ("task", "runs", "1"),
        ("task", "status", "--show", "ERROR"),
        ("task", "list-pending", "crawl"),
    ],
)
def test_an_unknown_zone_is_refused_naming_the_option(
    run: Any, paris: dict[str, int], words: tuple[str, ...]
) -> None:
    result = run(*words, "--tz", "Europe/Pariss")
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in result.output
    assert message.startswith("error: --tz: 'Europe/Pariss' is not a known IANA time zone")


def test_status_lists_its_tasks_in_one_zone(run: Any, paris: dict[str, int]) -> None:
    text = ok(run("task", "status", "--show", "OK", "--at-least"))
    listed = text.split("Times in UTC\n", 1)[1]
    assert offsets(listed) == {"+00:00"}, text  # the conditions said +02:00 (Paris)


#: the first earliest start of :func:`many` (the list reads the clock)
SOON = datetime.now(UTC).replace(second=0, microsecond=0) + H


@pytest.fixture
def many(db_url: str) -> list[Task]:
    """Seven tasks: five adaptive (one with a long key), two one-shot, all OK."""
    store = SQLAlchemyStore.from_url(db_url)
    try:
        store.create_task_type(TaskType(type="nap", backend_name="nap"))
        tasks = [
            Task(
                type="nap",
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=SOON + n * H,
                deadline=SOON + (n + 1) * H,
                key=f"site/{n}" if n != 2 else "a-very-long-key/" + "x" * 80 + "/the-end",
            )
            for n in range(5)
        ]
        tasks += [
            Task(
                type="nap",
                args=(n,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=SOON,
                deadline=SOON,
            )
            for n in (5, 6)
        ]
        return store.create_tasks(tasks, now=SOON - H)
    finally:
        store.close()


def test_list_prints_one_line_per_task_and_how_many_match(run: Any, many: list[Task]) -> None:
    lines = ok(run("task", "list")).splitlines()
    assert lines[:2] == ["Found 7 tasks", "Times in UTC"]
    header, rows = lines[2], lines[3:]
    assert header.split() == [
        "ID",
        "TYPE",
        "STATUS",
        "CONDITION",
        "EARLIEST",
        "START",
        "LAST",
        "RUN",
        "KEY",
    ]
    assert [row.split()[0] for row in rows] == [str(t.id) for t in many]
    # columns aligned: each starts where its header does
    for name in ("STATUS", "CONDITION", "EARLIEST START", "LAST RUN", "KEY"):
        column = header.index(name)
        assert all(row[column - 2 : column] == "  " and row[column] != " " for row in rows), name
    assert rows[0].split()[2:4] == ["waiting", "OK"]
    assert f"  {SOON:%Y-%m-%d %H:%M}  never  " in rows[0] and rows[0].endswith("  site/0")
    # the long key cut in its middle, to the room the 80 columns leave
    long = rows[2].split()[-1]
    assert long.startswith("a-very-long-") and long.endswith("/the-end") and "\u2026" in long
    assert len(long) == 24  # the narrowest: 80 columns leave less
    wide = ok(run("task", "list", env={"COLUMNS": "200"})).splitlines()
    assert wide[5].endswith(f"  {many[2].key}")  # whole where the terminal has room

    cut = ok(run("task", "list", "--limit", "3")).splitlines()
    heading = f"Showing 3 of 7 tasks (use --limit, or --after-id {many[2].id} for the next)"
    assert cut[0] == heading and cut[-1] == heading
    assert len(cut) == 1 + 1 + 1 + 3 + 1
    page = ok(run("task", "list", "--limit", "3", "--after-id", str(many[2].id))).splitlines()
    assert page[0] == (
        f"Showing 3 of 7 tasks, ids above {many[2].id} "
        f"(use --limit, or --after-id {many[5].id} for the next)"
    )
    last = ok(run("task", "list", "--after-id", str(many[5].id))).splitlines()
    assert last[0] == f"Showing 1 of 7 tasks, ids above {many[5].id}"
    # a policy is counted by the store as well (recurring: all but one-shot)
    recurring = ok(run("task", "list", "-p", "recurring", "-l", "2")).splitlines()
    assert recurring[0].startswith("Showing 2 of 5 tasks (")
    oneshot = ok(run("task", "list", "-p", "oneshot", "-l", "1")).splitlines()
    assert oneshot[0].startswith("Showing 1 of 2 tasks (") and len(oneshot) == 5
    assert ok(run("task", "list", "-p", "oneshot", "--kind", "cron")) == "Found 0 tasks\n"

    verbose = ok(run("task", "list", "-v", "-l", "2")).splitlines()
    assert verbose[:3] == [verbose[0], "Times in UTC", ""]
    assert verbose[0].startswith("Showing 2 of 7 tasks")
    assert "  Earliest start: " in " ".join(verbose) and "Next run" not in " ".join(verbose)
    assert [line for line in verbose if line.startswith("Task ")] == [
        f"Task {many[0].id}",
        f"Task {many[1].id}",
    ]


def test_list_json_keeps_its_keys_and_adds_the_condition(run: Any, many: list[Task]) -> None:
    listed = json.loads(ok(run("task", "list", "--json", "-l", "2")))
    added = json.loads(ok(run("task", "add", "nap", "-i", "1h", "--no-check-args", "--json")))[0]
    assert set(added) <= set(listed[0])
    assert set(listed[0]) - set(added) == {"condition"}
    assert listed[0]["condition"]["level"] == "OK"
    assert listed[0]["next_run"] == SOON.isoformat()


def test_list_with_condition_shows_the_condition_and_its_reason(
    run: Any, paris: dict[str, int]
) -> None:
    lines = ok(run("task", "list", "--condition", "error")).splitlines()
    assert lines[:2] == ["Found 2 tasks in ERROR", "Times in UTC"]
    assert lines[2].split()[-2:] == ["KEY", "DETAIL"]
    cron = next(line for line in lines if line.startswith(f"{paris['cron']} "))
    assert " ERROR late " in cron
    detail = lines[2].index("DETAIL")
    assert cron[detail:].startswith("The firing at ")
    assert offsets(cron) <= {"+00:00"}  # the detail's instants in the output's zone
    first = ok(run("task", "list", "--condition", "ERROR", "-l", "1")).splitlines()
    assert first[0] == (
        f"Showing the first 1 task in ERROR (use --limit, or --after-id {paris['cron']} "
        "for the next)"
    )


def test_a_scheduled_task_is_not_said_to_wait_for_its_start(run: Any, db_url: str) -> None:
    """A task whose first run was dispatched is ``scheduled``: explain said
    "status scheduled" and, in the same output, that it "may start from"
    and "may not start before" an instant to come, the words of a waiting
    task."""
    now = datetime.now(UTC).replace(microsecond=0)
    store = SQLAlchemyStore.from_url(db_url)
    try:
        store.create_task_type(TaskType(type="crawl", backend_name="crawl"))
        [task] = store.create_tasks(
            [
                Task(
                    type="crawl",
                    schedule_kind=ScheduleKind.CRON,
                    cron="0 3 * * *",
                    cron_max_duration=4 * H,
                    tz="Europe/Paris",
                    next_run=now - H,
                    deadline=now + 3 * H,
                )
            ],
            now=now - 2 * H,
        )
        ran = store.schedule_task_run(task.id or 0, now=now - timedelta(minutes=30))
    finally:
        store.close()
    text = ok(run("task", "explain", str(task.id)))
    assert "status scheduled" in text.splitlines()[1]
    assert "may start from" not in text and "may not start before" not in text, text
    assert "its first run was dispatched and has not ended" in text
    assert f"run {ran.id} (celery id {ran.backend_id[:8]}\u2026) was dispatched at" in text
    [row] = ok(run("task", "list")).splitlines()[3:]
    assert row.split()[2] == "scheduled"
