"""``swh scheduler simulate`` through click's runner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import services
import sqlalchemy as sa
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

WORKLOAD = """
days = 0.1
seed = 2
[runner]
min_sleep = "5 s"
sample_every = "10 min"
[types.job]
workers = 1
max_allowed_duration = "40 min"
[[tasks]]
type = "job"
count = 3
kind = "oneshot"
max_delay = "0 s"
duration = { median = "30 min", sigma = 0 }
"""


def run(*args: str, db_url: str | None = None) -> Result:
    prefix = ["scheduler", *(["--db-url", db_url] if db_url else [])]
    return CliRunner().invoke(swh, [*prefix, "simulate", *args])


def test_simulate_a_file_prints_json(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    result = run(str(path), "--policy", "deadline", "--policy", "fifo", "--json")
    assert result.exit_code == 0, (result.output, result.stderr)
    data = json.loads(result.stdout)
    assert [r["order"] for r in data["runs"]] == ["deadline", "fifo"]
    # one worker, three 30 min runs due at once, done by 40 min: the second
    # is late from 40 min to 60 min, the third from 40 to 90 min
    assert data["runs"][0]["outcomes"] == {"eventful": 3}
    assert data["runs"][0]["error_hours"] > 1
    assert "simulating" in result.stderr


def test_report_and_workers(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    report = str(tmp_path / "r")
    result = run(str(path), "--policy", "triage", "--workers", "job=3", "--report", report)
    assert result.exit_code == 0, (result.output, result.stderr)
    assert "| triage | 0.0 |" in result.output  # three workers: nobody late
    assert (tmp_path / "r" / "report.md").is_file()
    assert (
        json.loads((tmp_path / "r" / "results.json").read_text())["runs"][0]["types"]["job"][
            "workers"
        ]
        == 3
    )


def test_find_workers(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    result = run(str(path), "--find-workers", "--json")
    assert result.exit_code == 0, (result.output, result.stderr)
    assert json.loads(result.stdout)["workers"] == {"job": 3}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["nowhere.toml"], "workload: 'nowhere.toml' is not a file nor a shipped workload"),
        (["--workers", "job"], "workers: 'job' is not TYPE=VALUE"),
        (["--workers", "nope=2"], "workers: 'nope' is not a task type of the workload"),
        (["--interval", "job=1h"], "interval: --interval goes with --from-store"),
        (["--load", "0"], "Invalid value for '--load'"),
    ],
)
def test_bad_input_is_one_line(args: list[str], fragment: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert fragment in result.stderr and "Traceback" not in result.output + result.stderr


def test_from_store_reads_the_live_database_and_writes_nothing(sqlite_url: str) -> None:
    live = SQLAlchemyStore.from_url(sqlite_url)
    now = datetime.now(tz=UTC)
    live.create_task_type(
        TaskType(
            type="crawl",
            backend_name="crawl",
            default_interval=timedelta(hours=2),
            min_interval=timedelta(hours=1),
            max_interval=timedelta(days=1),
            backoff_factor=2,
        )
    )
    live.create_tasks(
        [
            Task(
                type="crawl",
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(hours=2),
                next_run=now + timedelta(minutes=n),
                deadline=now + timedelta(hours=2, minutes=n),
            )
            for n in range(20)
        ],
        now=now,
    )
    engine = sa.create_engine(sqlite_url)

    def snapshot() -> list[tuple[object, ...]]:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text("SELECT * FROM task ORDER BY id"))]

    before = snapshot()
    result = run(
        "--from-store",
        "--days",
        "0.5",
        "--workers",
        "crawl=2",
        "--interval",
        "crawl=1h",
        "--policy",
        "deadline",
        "--json",
        db_url=sqlite_url,
    )
    assert result.exit_code == 0, (result.output, result.stderr)
    data = json.loads(result.stdout)
    assert data["workload"]["tasks"] == 20 and data["workload"]["workers"] == {"crawl": 2}
    # twenty tasks every hour (the interval given) for half a day
    assert data["runs"][0]["dispatches"] >= 20 * 6
    assert snapshot() == before
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM task_run")).scalar() == 0
    engine.dispose()
    live.close()


def test_a_mistyped_simulation_store_is_named(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    refused = run(str(path), "--sim-db-url", "memroy")
    assert refused.exit_code == 2
    assert "sim-db-url: 'memroy' is not 'memory', 'sqlite' or the URL" in refused.stderr


@pytest.mark.postgresql
def test_a_live_database_given_to_simulate_in_is_refused_and_left_whole(
    tmp_path: Path, postgres_url: str
) -> None:
    live = SQLAlchemyStore.from_url(postgres_url)
    live.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
    now = datetime.now(UTC)
    live.create_tasks([Task(type="crawl", next_run=now, deadline=now)], now=now)
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    url = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    refused = run(str(path), "--sim-db-url", url)
    assert refused.exit_code == 2 and "give an empty database" in refused.stderr
    # nothing of the live database was dropped
    assert [t.type for t in live.search_tasks()] == ["crawl"]
    live.close()


@pytest.fixture
def empty_postgres() -> Iterator[str]:
    server = services.require("postgresql", services.postgres_url)
    name = f"swh_sim_{id(object())}"
    url = services.create_empty_database(server, name)
    yield url
    services.drop_database(server, name)


@pytest.mark.postgresql
def test_a_postgresql_simulation_database_gives_the_same_results(
    tmp_path: Path, empty_postgres: str
) -> None:
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    in_memory = run(str(path), "--policy", "deadline", "--json")
    on_sqlite = run(str(path), "--policy", "deadline", "--json", "--sim-db-url", "sqlite")
    on_postgres = run(str(path), "--policy", "deadline", "--json", "--sim-db-url", empty_postgres)
    assert on_postgres.exit_code == 0, (on_postgres.output, on_postgres.stderr)
    assert on_postgres.stdout == on_sqlite.stdout == in_memory.stdout
    # its tables are dropped after; a database with tables is refused
    engine = sa.create_engine(empty_postgres.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        assert not sa.inspect(conn).get_table_names()
        conn.execute(sa.text("CREATE TABLE mine (x int)"))
    engine.dispose()
    refused = run(str(path), "--sim-db-url", empty_postgres)
    assert refused.exit_code == 2 and "give an empty database" in refused.stderr
