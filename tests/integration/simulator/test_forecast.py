"""``swh scheduler forecast``: the live store's next hours, at today's
capacity and with more workers, through click's runner."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.simulator.forecast import Conditions, error_grows_from
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
M = timedelta(minutes=1)


def run(db_url: str, *args: str) -> Result:
    return CliRunner().invoke(swh, ["scheduler", "--db-url", db_url, "forecast", *args])


def _live(url: str, now: datetime) -> SQLAlchemyStore:
    """120 jobs of 2 minutes on the queue ``jobs``, each to run at most an
    hour apart and at least 30 minutes after its last run ended, all due
    within the next 20 minutes (never run), and 4 reports of a second every
    6 h on their own queue."""
    store = SQLAlchemyStore.from_url(url)
    store.create_task_type(TaskType(type="job", backend_name="x.job", queue="jobs"))
    store.create_task_type(TaskType(type="report", backend_name="x.report", queue="reports"))
    store.create_tasks(
        [
            Task(
                type="job",
                args=(n,),
                schedule_kind=ScheduleKind.PERIODIC,
                period=H,
                cooldown=30 * M,
                next_run=now + n * timedelta(seconds=10),
                deadline=now + n * timedelta(seconds=10),
                expected_duration=2 * M,
            )
            for n in range(120)
        ]
        + [
            Task(
                type="report",
                args=(n,),
                schedule_kind=ScheduleKind.PERIODIC,
                period=6 * H,
                next_run=now + n * M,
                deadline=now + n * M,
                expected_duration=timedelta(seconds=1),
            )
            for n in range(4)
        ],
        now=now,
    )
    return store


def test_a_forecast_says_when_error_grows_and_how_many_workers_stop_it(sqlite_url: str) -> None:
    """Worked by hand. A job's runs are drawn log-normal around 2 min
    (sigma 0.5: 2.27 min on average), and it may run again 30 min after
    one ends: every 32.3 min with room, 120 jobs ask for 120 x 2.27 / 32.3
    = 8.4 slots. With the one slot given, about 26 run per hour: an hour
    after its first start (its period) a job not run since is in ERROR, so
    ERROR grows from about the first hour, and from then on about 120 - 26
    = 94 are in ERROR at any moment (the horizon: 6 h). With 19 more (20
    slots, 42 % busy) a job waits for a slot a few seconds, far under its
    30 minutes of margin: none in ERROR at any sample. The reports (one
    slot, a second of work) are never in ERROR. The store is read only;
    the same forecast twice is the same."""
    now = datetime.now(tz=UTC)
    live = _live(sqlite_url, now)
    engine = sa.create_engine(sqlite_url)

    def snapshot() -> list[tuple[object, ...]]:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text("SELECT * FROM task ORDER BY id"))]

    before = snapshot()
    args = ["--hours", "6 h", "--workers", "jobs=1", "--workers", "reports=1"]
    result = run(sqlite_url, *args, "--more", "jobs=+19", "--json")
    assert result.exit_code == 0, (result.output, result.stderr)
    data = json.loads(result.stdout)
    assert data["tasks"] == 124 and data["horizon_hours"] == 6
    base, [more] = data["base"], data["variants"]
    assert base["workers"] == {"jobs": 1, "reports": 1}
    assert more["workers"] == {"jobs": 20, "reports": 1}
    jobs = base["types"]["job"]
    assert 80 <= jobs["horizon"]["ERROR"] <= 105, jobs
    # "at the horizon" is read at 6 h itself, after the samples every 10 min
    # (each standing for the 10 min after it: the last is at 5 h 50)
    for outlook in (jobs, base["overall"], base["types"]["report"]):
        hours = [reading[0] for reading in outlook["timeline"]]
        assert outlook["horizon"]["hours"] == hours[-1] == 6.0, hours[-3:]
        assert hours[-2] == pytest.approx(5 + 50 / 60, abs=1e-3)
        assert len(hours) == 6 * 6 + 1  # 0 h, 0 h 10, ... 5 h 50, then 6 h
        assert outlook["horizon"]["ERROR"] == outlook["timeline"][-1][3]
    assert jobs["start"]["ERROR"] == 0
    assert jobs["error_grows_from_hours"] is not None
    assert 0.9 <= jobs["error_grows_from_hours"] <= 2, jobs
    assert jobs["worst"]["ERROR"] >= jobs["horizon"]["ERROR"]
    assert base["overall"]["horizon"]["ERROR"] == jobs["horizon"]["ERROR"]
    assert base["types"]["report"]["error_hours"] == 0
    assert more["types"]["job"]["worst"]["ERROR"] == 0
    assert more["types"]["job"]["error_grows_from_hours"] is None
    assert more["overall"]["error_hours"] == 0
    # what it assumed, in words: the durations, no failures seen, the workers
    said = " ".join(data["assumptions"])
    assert "job: no run ended within the last hour" in said
    assert "assumed, not reported" not in said
    assert snapshot() == before
    again = run(sqlite_url, *args, "--json")
    assert json.loads(again.stdout)["base"] == data["base"]
    # on the store held in memory (the default), said so; a private SQLite
    # file gives the same forecast
    assert "simulated on the store held in memory" in said
    on_sqlite = json.loads(run(sqlite_url, *args, "--json", "--sim-db-url", "sqlite").stdout)
    assert on_sqlite["base"] == data["base"]
    assert "simulated on a private SQLite file" in " ".join(on_sqlite["assumptions"])
    # the table: the queues not given are assumed to have a slot, and said so
    text = run(sqlite_url, "--hours", "2 h", "--workers", "jobs=20")
    assert text.exit_code == 0, (text.output, text.stderr)
    assert "queue reports: 1 worker slot(s) assumed, not reported" in text.stdout
    assert "Workers per queue -> tasks in ERROR at 2 h" in text.stdout
    assert "jobs=20, reports=1: 0 (0.0)" in text.stdout
    engine.dispose()
    live.close()


def test_the_failure_shares_of_the_last_hour_are_assumed(sqlite_url: str) -> None:
    """One report ran and failed within the hour, one ran well: half the
    report runs are assumed to fail (and be retried)."""
    now = datetime.now(tz=UTC)
    live = _live(sqlite_url, now - 20 * M)
    claimed = live.claim_ready_tasks("report", now=now - 15 * M, limit=2)
    assert len(claimed) == 2
    for claim, status in zip(claimed, (RunStatus.FAILED, RunStatus.EVENTFUL), strict=True):
        live.start_task_run(claim.backend_id, started=now - 14 * M, worker="w@h")
        live.end_task_run(claim.backend_id, status=status, ended=now - 13 * M)
    result = run(sqlite_url, "--hours", "1 h", "--workers", "jobs=20", "--json")
    assert result.exit_code == 0, (result.output, result.stderr)
    said = json.loads(result.stdout)["assumptions"]
    assert "report: 50.0% of runs failed and 0.0% failed for good (the 2 runs ended" in (
        " ".join(said)
    )
    live.close()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--workers", "nowhere=2"], "workers: 'nowhere' is not the queue of a task type"),
        (["--workers", "jobs"], "workers: 'jobs' is not QUEUE=N"),
        (["--more", "jobs=4"], "more: 'jobs=4' is not QUEUE=+N"),
        (["--more", "jobs=+x"], "more: 'jobs=+x' is not QUEUE=+N"),
        (["--hours", "5 s"], "horizon: 0:00:05 is not between 2 minutes and 14 days"),
        (["--hours", "soon"], "hours"),
        (["--app", "x:y"], "--app and --broker-url go with --ask-workers"),
        (["--every", "15 min"], "every: --every goes with --record"),
        (["--record", "--every", "10 s"], "every: '10 s' is under a minute"),
        (["--max-stretch", "1.5"], "max_stretch: --max-stretch goes with --size"),
    ],
)
def test_bad_input_is_one_line(sqlite_url: str, args: list[str], fragment: str) -> None:
    live = _live(sqlite_url, datetime.now(tz=UTC))
    result = run(sqlite_url, *args)
    assert result.exit_code == 2, (result.output, result.stderr)
    assert fragment in result.stderr and "Traceback" not in result.output + result.stderr
    live.close()


def test_error_grows_from_the_first_sample_it_stays_above_the_start() -> None:
    def samples(*errors: int) -> list[Conditions]:
        return [Conditions(float(h), 0, 0, e) for h, e in enumerate(errors)]

    assert error_grows_from(samples(0, 0, 3, 1, 0, 2, 5)) == 5.0
    assert error_grows_from(samples(0, 4, 4, 0)) is None
    assert error_grows_from(samples(2, 3, 1, 3, 4)) == 3.0
    assert error_grows_from(samples(0)) is None
