"""A forecast made before a real run, checked against what the census
counted during it (issue 62's backtest): ``swh scheduler standalone``
(runner, listener, a Celery worker of one slot per type, an embedded
Redis), a forecast recorded at T over the next minutes, the census taken
every few seconds meanwhile, then ``swh scheduler backtest``."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from standalone_run import clean_env, start, wait_for

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import ScheduleKind, Task
from swh_like_scheduler.health.census import refresh
from swh_like_scheduler.store import SQLAlchemyStore

#: the forecast's horizon; SWH_SLOW=full checks a longer one
HORIZON = timedelta(minutes=6 if os.environ.get("SWH_SLOW") == "full" else 2)
TASKS = 20
#: how far before the horizon the last census may fall (the test's docstring)
CENSUS_GAP = timedelta(seconds=12)


def cli(url: str, *args: str) -> str:
    result = CliRunner().invoke(swh, ["scheduler", "--db-url", url, *args])
    assert result.exit_code == 0, (result.output, result.stderr)
    return result.stdout


@pytest.mark.acceptance
@pytest.mark.timeout(int(HORIZON.total_seconds()) + 240)
def test_a_forecast_matches_what_the_census_counts_during_the_run(tmp_path: Path) -> None:
    """Worked by hand. 20 periodic tasks that sleep 2 s, each to start at
    most 30 s after its last start and at least 10 s after its last end,
    share one worker slot: 20 runs of 2 s ask for 40 s of the slot per 30 s
    period, 133 %. The slot runs 15 of them per period, so a task is
    visited about every 40 s and is in ERROR (later than its period) for
    about 10 s of each visit's 40: a quarter of the tasks, 5, on average
    once the first period has passed; all due at once, they stay in step,
    so the count rises and falls in waves between 0 and about 10. Both the
    forecast (the scheduler's own code on a virtual clock) and the real
    platform should see that: ERROR grows in the forecast, its count at
    each census within 4 tasks of the census's on average, and the census
    covers the horizon (its last sample at most 12 s before the end: a CI
    run measured 112 s of 120 with a census every 4 s on a loaded machine)."""
    env = clean_env(tmp_path)
    url = f"sqlite:///{tmp_path / 'backtest.db'}"
    cli(url, "db", "init")
    cli(url, "task-type", "register")
    store = SQLAlchemyStore.from_url(url)
    queues = sorted({t.effective_queue for t in store.get_task_types()})
    run_for = int(HORIZON.total_seconds()) + 60
    process, _ = start(
        env, tmp_path, "--db-url", url, "--no-examples", "--no-api",
        "--workers-concurrency", "1", "--duration", str(run_for),
    )  # fmt: skip
    try:
        wait_for(lambda: any(w.online for w in store.get_workers()), 60, "a worker online")
        now = datetime.now(tz=UTC)
        store.create_tasks(
            [
                Task(
                    type="sleep",
                    kwargs={"duration": 2.0},
                    key=f"beat-{n}",
                    schedule_kind=ScheduleKind.PERIODIC,
                    period=timedelta(seconds=30),
                    cooldown=timedelta(seconds=10),
                    next_run=now + timedelta(seconds=5),
                    deadline=now + timedelta(seconds=5),
                    expected_duration=timedelta(seconds=2),
                )
                for n in range(TASKS)
            ],
            now=now,
        )
        minutes = f"{int(HORIZON.total_seconds() // 60)} min"
        slots = [arg for q in queues for arg in ("--workers", f"{q}=1")]
        printed = json.loads(cli(url, "forecast", "--hours", minutes, *slots, "--record", "--json"))
        at = datetime.fromisoformat(printed["now"])
        # the census every few seconds until the horizon (history thinned
        # to a sample per keep/240: 5 s)
        while datetime.now(tz=UTC) < at + HORIZON + timedelta(seconds=3):
            refresh(store, datetime.now(tz=UTC), holder="backtest", keep=timedelta(minutes=20))
            time.sleep(2)
    finally:
        process.terminate()
        process.wait(timeout=60)
    [found] = json.loads(cli(url, "backtest", "--limit", "1", "--json"))
    overall = found["types"]["overall"]
    # the last census within the horizon is at most a sample (5 s) and a
    # census's own time (seconds on a loaded machine) before its end
    assert found["covered"] >= 1 - CENSUS_GAP / HORIZON, found
    assert overall["censuses"] >= HORIZON.total_seconds() / 10, found
    predicted = printed["base"]["types"]["sleep"]
    assert predicted["error_grows_from_hours"] is not None and predicted["worst"]["ERROR"] >= 3
    assert overall["mean_abs_error_tasks"] <= 4, found
    store.close()
