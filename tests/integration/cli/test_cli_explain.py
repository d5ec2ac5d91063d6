"""``task explain`` and ``task status`` on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import BlackoutPeriod, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)


def scenario(store: SQLAlchemyStore) -> tuple[int, int, int]:
    store.create_task_type(TaskType(type="crawl", backend_name="crawl"))
    periodic = Task(
        type="crawl",
        args=("periodic",),
        schedule_kind=ScheduleKind.PERIODIC,
        period=24 * H,
        next_run=NOW - 20 * H,
        deadline=NOW + 2 * H,
        last_good_start_at=NOW - 23 * H,
        last_good_end_at=NOW - 21 * H,
        last_start_at=NOW - 23 * H,
        last_end_at=NOW - 21 * H,
        average_good_duration=2 * H,
    )
    cron = Task(
        type="crawl",
        args=("cron",),
        schedule_kind=ScheduleKind.CRON,
        cron="0 3 * * *",
        cron_max_duration=4 * H,
        tz="Europe/Paris",
        next_run=NOW - 33 * H,
        deadline=NOW - 29 * H,
        last_good_start_at=NOW - 57 * H,
        last_good_end_at=NOW - 56 * H,
    )
    blacked_out = Task(
        type="crawl",
        args=("blackout",),
        schedule_kind=ScheduleKind.ADAPTIVE,
        current_interval=H,
        next_run=NOW - H,
        deadline=NOW,
        blackout_periods=(BlackoutPeriod.parse({"start": "13:00", "end": "15:30"}),),
        tz="Europe/Paris",
    )
    a, b, c = store.create_tasks([periodic, cron, blacked_out], now=NOW - 60 * H)
    return a.id or 0, b.id or 0, c.id or 0


def test_explain_warning_error_and_blackout(db_url: str) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    periodic, cron, blacked_out = scenario(store)
    store.close()
    runner = CliRunner()

    def explain(task_id: int) -> dict:  # type: ignore[type-arg]
        result = runner.invoke(
            swh,
            [
                "scheduler",
                "--db-url",
                db_url,
                "task",
                "explain",
                str(task_id),
                "--at",
                NOW.isoformat(),
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        return json.loads(result.output)  # type: ignore[no-any-return]

    warning = explain(periodic)
    assert warning["condition"]["level"] == "WARNING"
    assert warning["condition"]["reason"] == "likely_late"
    error = explain(cron)
    assert error["condition"]["level"] == "ERROR"
    assert error["condition"]["reason"] == "late"
    inside = explain(blacked_out)
    assert [a["kind"] for a in inside["adjustments"]] == ["blackout"]
    # 12:00 UTC is 14:00 in Paris (summer time): the window ends at 15:30 local
    assert inside["can_start_by"] == "2026-06-15T13:30:00+00:00"
    assert inside["should_start_by"] == NOW.isoformat()
    assert not inside["ready"]
    text = runner.invoke(
        swh,
        [
            "scheduler",
            "--db-url",
            db_url,
            "task",
            "explain",
            str(blacked_out),
            "--at",
            NOW.isoformat(),
        ],
    )
    assert "blackout" in text.output and text.exit_code == 0
    missing = runner.invoke(swh, ["scheduler", "--db-url", db_url, "task", "explain", "999"])
    assert missing.exit_code == 2 and "no task with id 999" in missing.stderr


def test_status_counts_conditions(db_url: str) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    scenario(store)
    store.close()
    result = CliRunner().invoke(
        swh,
        [
            "scheduler",
            "--db-url",
            db_url,
            "task",
            "status",
            "--show",
            "WARNING",
            "--at-least",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    counts = data["counts"]["crawl"]
    assert sum(counts.values()) == 3
    assert counts["ERROR"] >= 1 and counts["WARNING"] + counts["ERROR"] == len(data["tasks"])


def test_status_counts_and_lists_a_one_shot_that_gave_up(db_url: str) -> None:
    """A one-shot task disabled after its retries is in ERROR (gave_up):
    ``task status`` counts it and ``--show ERROR`` lists it."""
    store = SQLAlchemyStore.from_url(db_url)
    store.create_task_type(TaskType(type="remind", backend_name="remind", num_retries=2))
    [gave_up] = store.create_tasks(
        [
            Task(
                type="remind",
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=NOW - H,
                deadline=NOW - H,
                status=TaskStatus.DISABLED,
                failure_count=3,
            )
        ],
        now=NOW - 2 * H,
    )
    store.close()
    result = CliRunner().invoke(
        swh, ["scheduler", "--db-url", db_url, "task", "status", "--show", "ERROR", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["counts"]["remind"] == {"OK": 0, "WARNING": 0, "ERROR": 1}
    assert [(t["id"], t["reason"]) for t in data["tasks"]] == [(gave_up.id, "gave_up")]


def test_explain_and_status_warn_of_a_cooldown_that_makes_every_run_late(db_url: str) -> None:
    """Issue 46: an hourly task whose runs take 6 minutes on average. With
    a cooldown of 54 min given, each run may start only 1 h after the last
    start, 6 min past its should_start_by: ``explain`` and the condition
    say so with the numbers. With the default cooldown (following the run
    time) nothing is said."""
    store = SQLAlchemyStore.from_url(db_url)
    store.create_task_type(TaskType(type="report", backend_name="report"))
    # ``task status`` reads the clock: the runs are of the last minutes
    now = datetime.now(UTC).replace(microsecond=0)
    started = now - 10 * MINUTE

    def hourly(name: str, cooldown: timedelta | None) -> Task:
        return Task(
            type="report",
            args=(name,),
            schedule_kind=ScheduleKind.PERIODIC,
            period=H,
            cooldown=cooldown,
            next_run=started + H,
            deadline=started + H - 6 * MINUTE,
            last_good_start_at=started,
            last_good_end_at=started + 6 * MINUTE,
            last_start_at=started,
            last_end_at=started + 6 * MINUTE,
            average_good_duration=6 * MINUTE,
        )

    given, default = store.create_tasks(
        [hourly("given", 54 * MINUTE), hourly("default", None)], now=started
    )
    store.close()
    assert not given.cooldown_is_default and default.cooldown_is_default
    runner = CliRunner()

    def invoke(*args: str) -> str:
        result = runner.invoke(swh, ["scheduler", "--db-url", db_url, *args])
        assert result.exit_code == 0, result.output
        return result.output

    text = invoke("task", "explain", str(given.id), "--at", now.isoformat())
    assert "Condition: WARNING (cooldown_too_long) - Runs take 6m on average" in text
    assert "Cooldown: 54m, given (it stays as it is)" in text
    assert (
        "  Warning: Runs take 6m on average: with the cooldown of 54m, a run may start again "
        "1h after the last one started (6m + 54m), while it should start within 1h - 6m = "
        "54m: each run will start 6m late. To keep the period, lower the cooldown to 48m or "
        "less (period - 2 x 6m)"
    ) in text
    answer = json.loads(
        invoke("task", "explain", str(default.id), "--at", now.isoformat(), "--json")
    )
    assert answer["condition"]["reason"] == "ok"
    assert answer["cooldown"] == {
        "seconds": 42 * 60,
        "is_default": True,
        "detail": "42m, the default: 90 % of the period less twice the run time (6m), "
        "following the run time at each good run",
        "warning": None,
    }
    shown = invoke("task", "status", "--show", "WARNING", "--json")
    assert [(t["id"], t["reason"]) for t in json.loads(shown)["tasks"]] == [
        (given.id, "cooldown_too_long")
    ]
    assert "cooldown 0:42:00 (the default: it follows the run time)" in invoke(
        "task", "list", "--type", "report", "-v"
    )
