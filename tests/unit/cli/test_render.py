"""The human output's helpers (:mod:`swh_like_scheduler.cli.render`): a
run named by its number with its Celery id beside, keys cut in their
middle, the one-line-per-task table, and instants in the output's zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from swh_like_scheduler.cli import render
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskRun, TaskStatus
from swh_like_scheduler.policy.condition import Condition, ConditionReport, Reason

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
ELLIPSIS = "\u2026"


def a_task(task_id: int, key: str | None, **changes: object) -> Task:
    values: dict[str, object] = {
        "id": task_id,
        "type": "nap",
        "schedule_kind": ScheduleKind.ADAPTIVE,
        "current_interval": H,
        "next_run": NOW + H,
        "deadline": NOW + 2 * H,
        "key": key,
    }
    values.update(changes)
    return Task(**values)  # type: ignore[arg-type]


def test_a_run_is_its_number_with_the_start_of_its_celery_id() -> None:
    run = TaskRun(
        id=216,
        task_id=1,
        backend_id="dbf6279e-1234-5678-9abc-def012345678",
        slot=NOW,
        scheduled=NOW,
    )
    assert render.run_name(run) == f"run 216 (celery id dbf6279e{ELLIPSIS})"


def test_shorten_keeps_both_ends() -> None:
    assert render.shorten("site/a", 10) == "site/a"
    cut = render.shorten("beat:proj.tasks.cleanup-every-night", 16)
    assert cut == f"beat:pro{ELLIPSIS}y-night" and len(cut) == 16


def test_the_table_has_one_aligned_line_per_task_in_the_output_zone() -> None:
    late = ConditionReport(Condition.ERROR, Reason.LATE, "The firing at X should have finished.")
    rows = [
        (a_task(1, "site/a"), None),
        (a_task(22, "k" * 60, status=TaskStatus.DISABLED, last_start_at=NOW - H), late),
    ]
    with render.one_clock(ZoneInfo("Europe/Paris")):
        lines = render.tasks_table(rows, columns=80)
    assert lines[0].split()[:4] == ["ID", "TYPE", "STATUS", "CONDITION"]
    assert lines[1].split() == [
        "1",
        "nap",
        "waiting",
        "-",
        "2026-01-15",
        "14:00",
        "never",
        "site/a",
    ]
    assert lines[2].split()[:6] == ["22", "nap", "disabled", "ERROR", "late", "-"]
    assert lines[2].split()[6:8] == ["2026-01-15", "12:00"]  # its last run, in Paris
    for name in ("TYPE", "STATUS", "CONDITION", "EARLIEST START", "LAST RUN", "KEY"):
        column = lines[0].index(name)
        assert all(line[column - 2 : column] == "  " != line[column] for line in lines[1:])
    key = lines[2].split()[-1]
    assert len(key) == render.KEY_WIDTH and ELLIPSIS in key
    detailed = render.tasks_table(rows, columns=120, detail=True)
    column = detailed[0].index("DETAIL")
    assert detailed[2][column:] == "The firing at X should have finished."
    assert detailed[1].rstrip() == detailed[1] and len(detailed[1]) < column


def test_an_output_is_in_utc_unless_told() -> None:
    assert render.when(NOW - H, NOW) == "an hour ago (2026-01-15 11:00:00+00:00)"
    with render.one_clock(ZoneInfo("Asia/Tokyo")):
        assert render.when(NOW - H, NOW).endswith("(2026-01-15 20:00:00+09:00)")
        assert render.zone_line(ZoneInfo("Asia/Tokyo")) == "Times in Asia/Tokyo"
    with render.one_clock(ZoneInfo("Asia/Tokyo"), as_json=True):
        assert render.when(NOW, NOW).endswith("+00:00)")


def test_durations_are_shown_to_the_millisecond() -> None:
    shown = render.duration_text
    assert shown(timedelta(seconds=3, microseconds=954478)) == "0:00:03.954"
    assert shown(timedelta(seconds=3, microseconds=999600)) == "0:00:04"
    assert shown(timedelta(minutes=54)) == "0:54:00"
    assert shown(timedelta(days=1, hours=2, microseconds=1600)) == "1 day, 2:00:00.002"
    assert shown(None) == "-"
    # a default cooldown that followed a measured run time, as `task show` prints it
    task = Task(
        type="t",
        args=(),
        kwargs={},
        schedule_kind=ScheduleKind.PERIODIC,
        period=timedelta(seconds=5),
        cooldown=timedelta(seconds=3, microseconds=954478),
        cooldown_is_default=True,
        next_run=datetime(2026, 12, 3, tzinfo=UTC),
        deadline=datetime(2026, 12, 3, 0, 0, 5, tzinfo=UTC),
    )
    assert render.schedule_line(task) == (
        "  Period: 0:00:05, cooldown 0:00:03.954 (the default: it follows the run time)"
    )
