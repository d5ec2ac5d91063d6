"""``swh scheduler import-beat`` through click's runner, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import RunStatus, Task
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore

CONFIG = """
from datetime import timedelta
from celery.schedules import crontab

timezone = "Europe/Paris"
beat_schedule = {
    "every-5s": {"task": "proj.tick", "schedule": %(period)s, "args": ("5s",),
                 "options": {"priority": 3}},
    "every-minute": {"task": "proj.tick", "schedule": crontab(), "args": ("minute",)},
}
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The current directory, where the configuration modules are written
    (``import-beat`` imports from it, as ``celery -A`` does)."""
    monkeypatch.chdir(tmp_path)
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("beatconf_"):
            del sys.modules[name]


def config(workdir: Path, period: str = "timedelta(seconds=5)", text: str = CONFIG) -> str:
    """A new configuration module; its name."""
    name = f"beatconf_{uuid.uuid4().hex[:8]}"
    (workdir / f"{name}.py").write_text(text % {"period": period})
    return name


def run(db_url: str, *args: str) -> Result:
    return CliRunner().invoke(swh, ["scheduler", "--db-url", db_url, "import-beat", *args])


def tasks(db_url: str) -> dict[str, Task]:
    store = SQLAlchemyStore.from_url(db_url)
    try:
        return {t.key or "": t for t in store.search_tasks()}
    finally:
        store.close()


def test_import_into_an_empty_database_then_again(db_url: str, workdir: Path) -> None:
    module = config(workdir)
    refused = run(db_url, module)
    assert refused.exit_code == 2, refused.output
    assert "error: beat_schedule: 2 entries refused, nothing imported:\n" in refused.stderr
    # one refused entry per line
    each = refused.stderr.splitlines()[1:]
    assert len(each) == 2 and "every-5s" in each[0] and "every-minute" in each[1]
    assert "--create-types" in refused.stderr
    assert tasks(db_url) == {}

    first = run(db_url, module, "--create-types")
    assert first.exit_code == 0, (first.output, first.stderr)
    where, *lines = first.stdout.splitlines()
    # the database written to, and where it came from, first
    assert where.startswith("writing to database ") and where.endswith(" (from --db-url)")
    assert lines[0] == "task type proj.tick created (Celery task proj.tick, queue celery)"
    assert lines[1].startswith(
        "entry 'every-5s': task 1 created (type proj.tick, every 5s, cooldown 4.5s, first run "
    )
    assert lines[2].startswith(
        "entry 'every-minute': task 2 created (type proj.tick, cron '* * * * *' (Europe/Paris)"
    )
    assert lines[-1] == "2 beat_schedule entries: 2 created; 1 task type(s) created"
    # how a periodic entry runs here, said once at its import
    assert lines[-2].startswith("note: 1 periodic entry ('every-5s'): beat starts one exactly")
    assert "up to 11 % more often than beat" in lines[-2]
    assert "warning: entry 'every-5s': option 'priority' is not translated" in first.stderr
    created = tasks(db_url)
    assert set(created) == {"beat:every-5s", "beat:every-minute"}

    second = run(db_url, module, "--create-types")
    assert second.exit_code == 0
    assert second.stdout.splitlines()[1:] == [
        "entry 'every-5s': unchanged (task 1)",
        "entry 'every-minute': unchanged (task 2)",
        "2 beat_schedule entries: 2 unchanged",
    ]
    assert tasks(db_url) == created


def test_a_changed_entry_dry_run_json_exclude_and_prune(db_url: str, workdir: Path) -> None:
    assert run(db_url, config(workdir), "--create-types").exit_code == 0
    changed = config(workdir, period="60")
    dry = run(db_url, changed, "--dry-run", "--json")
    assert dry.exit_code == 0
    answer = json.loads(dry.stdout)
    assert answer["dry_run"] is True
    assert [(e["entry"], e["action"]) for e in answer["entries"]] == [
        ("every-5s", "updated"),
        ("every-minute", "unchanged"),
    ]
    assert answer["entries"][0]["changes"] == ["schedule: every 5s -> every 1m"]
    assert answer["summary"].startswith("Dry run, nothing written")
    assert tasks(db_url)["beat:every-5s"].period.total_seconds() == 5

    done = run(db_url, changed)
    assert done.exit_code == 0
    assert "entry 'every-5s': task 1 updated (schedule: every 5s -> every 1m)" in done.stdout
    assert tasks(db_url)["beat:every-5s"].period.total_seconds() == 60

    only_one = config(workdir, text=CONFIG.replace('"every-minute"', '"renamed"'))
    unknown = run(db_url, only_one, "--exclude", "nope")
    assert unknown.exit_code == 2
    assert "error: exclude: beat_schedule has no entry 'nope'" in unknown.stderr
    kept = run(db_url, only_one, "--exclude", "renamed")
    assert "task 2 (key beat:every-minute): no longer in beat_schedule; kept" in kept.stdout
    pruned = run(db_url, only_one, "--prune", "--exclude", "renamed")
    assert "task 2 (key beat:every-minute): no longer in beat_schedule: deleted" in pruned.stdout
    assert set(tasks(db_url)) == {"beat:every-5s"}


def test_usage_errors(db_url: str, workdir: Path) -> None:
    neither = run(db_url)
    assert neither.exit_code == 2 and "give a configuration MODULE or --app" in neither.output
    both = run(db_url, "mod", "--app", "proj:app")
    assert both.exit_code == 2
    missing = run(db_url, "no_such_module_here")
    assert missing.exit_code == 2
    assert missing.stderr.strip() == (
        "error: MODULE: cannot import 'no_such_module_here': No module named 'no_such_module_here'"
    )
    no_app = run(db_url, "--app", "no_such_module_here:app")
    assert no_app.exit_code == 2 and no_app.stderr.startswith("error: app: cannot load")


def test_an_app_given_with_app(db_url: str, workdir: Path) -> None:
    name = f"beatconf_{uuid.uuid4().hex[:8]}"
    (workdir / f"{name}.py").write_text(
        "from celery import Celery\n"
        "app = Celery('proj', set_as_current=False)\n"
        "app.conf.timezone = 'Asia/Tokyo'\n"
        "app.conf.task_routes = {'proj.*': {'queue': 'proj'}}\n"
        "app.conf.beat_schedule = {'t': {'task': 'proj.tick', 'schedule': 30.0}}\n"
    )
    result = run(db_url, "--app", f"{name}:app", "--create-types")
    assert result.exit_code == 0, (result.output, result.stderr)
    assert "task type proj.tick created (Celery task proj.tick, queue proj)" in result.stdout
    task = tasks(db_url)["beat:t"]
    assert task.tz == "Asia/Tokyo"


def test_a_hand_edit_of_an_imported_task_is_told_and_the_import_reports_it(
    db_url: str, workdir: Path
) -> None:
    module = config(workdir)
    assert run(db_url, module, "--create-types").exit_code == 0
    edit = CliRunner().invoke(
        swh, ["scheduler", "--db-url", db_url, "task", "update", "1", "--period", "1m"]
    )
    assert edit.exit_code == 0, (edit.output, edit.stderr)
    assert "warning: task 1 is beat_schedule entry 'every-5s' (key beat:every-5s)" in edit.stderr
    assert "sets schedule_kind, period back" not in edit.stderr
    assert "sets period back to the entry's" in edit.stderr
    # a field the entry does not decide is the operator's: no warning
    quiet = CliRunner().invoke(
        swh, ["scheduler", "--db-url", db_url, "task", "update", "1", "--priority", "high"]
    )
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr
    again = run(db_url, module)
    assert "entry 'every-5s': task 1 updated (schedule: every 1m -> every 5s)" in again.stdout
    assert tasks(db_url)["beat:every-5s"].priority.value == "high"


HOURLY = """
beat_schedule = {"hourly-report": {"task": "proj.report", "schedule": 3600.0}}
"""


def test_a_run_time_that_makes_every_run_late_with_the_cooldown_warns(
    db_url: str, workdir: Path
) -> None:
    """Issue 46: the import gives an hourly entry a cooldown of 54 min. A new
    task's run time is not known (beat gives none): nothing to say. Once
    its runs are known to take 6 min, each run may start only 1 h after
    the last start, 6 min past its should_start_by: importing again warns,
    with the numbers."""
    module = config(workdir, text=HOURLY)
    first = run(db_url, module, "--create-types")
    assert first.exit_code == 0, first.output
    assert "Runs take" not in first.stderr
    store = SQLAlchemyStore.from_url(db_url)
    try:
        task = store.get_task_by_key("beat:hourly-report")
        assert task is not None and task.cooldown == timedelta(minutes=54)
        [claimed] = store.claim_ready_tasks(task.type, now=task.next_run, limit=1)
        store.start_task_run(claimed.backend_id, started=task.next_run, worker="w")
        store.end_task_run(
            claimed.backend_id,
            status=RunStatus.EVENTFUL,
            ended=task.next_run + timedelta(minutes=6),
            apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
        )
    finally:
        store.close()
    again = run(db_url, module)
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[1] == f"entry 'hourly-report': unchanged (task {task.id})"
    assert (
        f"warning: entry 'hourly-report' (task {task.id}): Runs take 6m on average: with the "
        "cooldown of 54m, a run may start again 1h after the last one started (6m + 54m), "
        "while it should start within 1h - 6m = 54m: each run will start 6m late. To keep "
        "the period, lower the cooldown to 48m or less (period - 2 x 6m)"
    ) in again.stderr
    assert tasks(db_url)["beat:hourly-report"].cooldown == timedelta(minutes=54)  # stays
