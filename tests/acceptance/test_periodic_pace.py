"""A periodic task given only ``--period`` runs about once per period on an
idle platform (issue 31: it ran back to back, once a second); one given
``--cooldown 0`` still runs as often as the platform allows. The whole
platform runs for real: ``swh scheduler standalone`` (runner, listener, a
Celery worker per type, an embedded Redis), a 0.2 s body, a 5 s period."""

from __future__ import annotations

import signal
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner
from standalone_run import assert_nothing_left, children, clean_env, start, wait_for

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import TaskRun
from swh_like_scheduler.policy import default_cooldown, ewma
from swh_like_scheduler.store import SQLAlchemyStore

WINDOW = timedelta(seconds=20)
#: how much sooner than its cooldown a start may be recorded (the gaps' check)
TOLERANCE = timedelta(milliseconds=100)


def cli(url: str, *args: str) -> str:
    result = CliRunner().invoke(swh, ["scheduler", "--db-url", url, *args])
    assert result.exit_code == 0, (result.output, result.stderr)
    return result.output


def starts_in_window(runs: list[TaskRun]) -> list[TaskRun]:
    """The runs that started within WINDOW of the first one, oldest first."""
    started = sorted((r for r in runs if r.started is not None), key=lambda r: r.started)  # type: ignore[arg-type, return-value]
    assert started, "no run started"
    first = started[0].started
    assert first is not None
    return [r for r in started if r.started is not None and r.started - first <= WINDOW]


def windows_closed(store: SQLAlchemyStore) -> bool:
    """Both tasks have a run started more than WINDOW after their first:
    every run of their windows has started (and the one before it ended)."""
    for key in ("default", "eager"):
        task = store.get_task_by_key(key)
        assert task is not None
        started = [r.started for r in store.get_task_runs(task.id or 0, limit=1000) if r.started]
        if not started or max(started) - min(started) <= WINDOW:
            return False
    return True


@pytest.mark.acceptance
@pytest.mark.timeout(150)
def test_a_period_alone_runs_about_once_per_period(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    url = f"sqlite:///{tmp_path / 'pace.db'}"
    cli(url, "db", "init")
    cli(url, "task-type", "register")
    cli(url, "task", "add", "sleep", "duration=0.2", "--period", "5s", "--key", "default")
    cli(url, "task", "add", "sleep", "duration=0.2", "--period", "5s", "--cooldown", "0",
        "--key", "eager")  # fmt: skip
    # stopped (Ctrl-C) once both windows are closed; --duration bounds it
    process, _ = start(
        env, tmp_path, "--db-url", url, "--no-examples", "--no-api", "--duration", "60",
        "--refresh", "5",
    )  # fmt: skip
    watcher = SQLAlchemyStore.from_url(url)
    try:
        wait_for(lambda: windows_closed(watcher) or process.poll() is not None, 90, "20 s of runs")
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        watcher.close()
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0, (tmp_path / "standalone.err").read_text()
    assert_nothing_left(tmp_path / "run", children(tmp_path / "run"))
    store = SQLAlchemyStore.from_url(url)
    try:
        default = store.get_task_by_key("default")
        eager = store.get_task_by_key("eager")
        assert default is not None and eager is not None
        # the default follows the run time: 0.9 x 5 s less twice the runs' average
        assert default.cooldown_is_default and default.average_good_duration is not None
        assert default.cooldown == default_cooldown(
            timedelta(seconds=5), default.average_good_duration
        )
        assert timedelta(seconds=3.5) < default.cooldown < timedelta(seconds=4.5)
        assert eager.cooldown == timedelta(0) and not eager.cooldown_is_default
        paced = store.get_task_runs(default.id or 0, limit=1000)
        eager_runs = store.get_task_runs(eager.id or 0, limit=1000)
    finally:
        store.close()
    window = starts_in_window(paced)
    # about once per period over 20 s: 4 or 5 runs on a quiet machine (the
    # first, then every ~4.3 s: a run of 0.2 s, then the cooldown of about
    # 4.1 s); never stalled
    assert len(window) >= 3, [r.started for r in window]
    # never back to back: each run waited the cooldown in force after the
    # last good end. That cooldown follows the runs' average duration (an
    # EWMA of start to end) as each end was applied: a first run slowed by
    # a busy machine (0.48 s for a sleep of 0.2) leaves 3.54 s, not 4.1
    average: timedelta | None = None
    cooldowns: dict[str, timedelta] = {}
    for run in sorted(paced, key=lambda r: r.id or 0):
        if run.started is not None and run.ended is not None and run.status.is_good:
            average = ewma(average, run.ended - run.started)
            cooldowns[run.backend_id] = default_cooldown(timedelta(seconds=5), average)
    for before, after in pairwise(window):
        assert before.ended is not None and after.started is not None
        cooldown = cooldowns[before.backend_id]
        assert cooldown > timedelta(seconds=2), (cooldown, before)
        # (a start is recorded by the start guard, an end from the worker's
        # event: two paths to the store's clock; starts were seen up to 23 ms
        # short of the cooldown on a loaded machine)
        assert after.started - before.ended >= cooldown - TOLERANCE, (cooldown, before, after)
    # so at most one start per shortest cooldown in force (a slow first run
    # shortens the first ones: 6 starts in the window were seen)
    shortest = min(cooldowns[run.backend_id] for run in window[:-1]) - TOLERANCE
    assert len(window) <= 1 + WINDOW / shortest, [r.started for r in window]
    # the same task with --cooldown 0 ran as often as the runner's 1 s pass allows
    assert len(starts_in_window(eager_runs)) >= 10, len(eager_runs)
