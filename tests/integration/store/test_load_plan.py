"""The monitor's duties and /health read the runs they need, never every
run the table keeps (it grows by a run per dispatch, and they run every
few seconds). The load measure's ``delivered`` part was one ``OR`` of
"ended in the window" and "still going", which no index serves: SQLite and
PostgreSQL's generic plan both scanned ``task_run``; /health's count of
open runs, a bound ``IN``, scanned it under a generic plan too. Checked on
a table of old runs, with PostgreSQL's statistics taken and its plans made
generic (as a statement prepared by the driver may become after five
runs)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg
from waiting import wait_until

from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.monitor.duties import MonitorSettings, monitor_tick
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.sql_load import delivered_query
from swh_like_scheduler.store.tables import task_run as run_t

NOW = datetime(2026, 3, 1, tzinfo=UTC)
H = timedelta(hours=1)
RUNS = 20_000


def _old_runs(store: SQLAlchemyStore) -> None:
    """200 adaptive tasks with 100 runs each, all ended days before ``NOW``,
    and one run going on."""
    store.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
    tasks = store.create_tasks(
        [
            Task(
                type="crawl",
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=NOW,
                deadline=NOW,
            )
            for n in range(200)
        ],
        now=NOW - 1000 * H,
    )
    rows: list[dict[str, Any]] = []
    for n in range(RUNS):
        task, slot = tasks[n % len(tasks)], NOW - (900 - n // len(tasks)) * H
        ended = n < RUNS - 1
        rows.append(
            {
                "task_id": task.id,
                "backend_id": f"run-{n}",
                "slot": slot,
                "scheduled": slot,
                "started": slot,
                "ended": slot + H / 2 if ended else None,
                "status": RunStatus.EVENTFUL.value if ended else RunStatus.STARTED.value,
                "history": [],
            }
        )
    with store.engine.begin() as conn:
        conn.execute(sa.insert(run_t), rows)


@pytest.mark.postgresql
def test_postgresql_reads_the_window_s_runs_by_index(postgres_url: str) -> None:
    store = SQLAlchemyStore.from_url(postgres_url)
    try:
        _old_runs(store)
        assert store.measure_type_loads(now=NOW, window=H, slack=H)["crawl"].delivered > 0
    finally:
        store.close()
    compiled = delivered_query("postgresql", NOW, H).compile(
        dialect=pg_psycopg.dialect(), compile_kwargs={"render_postcompile": True}
    )
    sql, values = compiled.string, []
    for name, value in compiled.params.items():
        values.append(value)
        sql = sql.replace(f"%({name})s", f"${len(values)}")
    given = ", ".join(
        f"'{v.isoformat()}'::timestamptz" if isinstance(v, datetime) else repr(v) for v in values
    )
    url = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE task_run")
        conn.execute("ANALYZE task")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE delivered AS {sql}")
        rows = conn.execute(f"EXPLAIN EXECUTE delivered({given})").fetchall()
    plan = "\n".join(str(r[0]) for r in rows)
    assert "Seq Scan on task_run" not in plan, plan
    assert "ix_task_run_ended" in plan and "ix_task_run_open" in plan, plan


def test_sqlite_reads_the_window_s_runs_by_index(sqlite_url: str) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    try:
        _old_runs(store)
        assert store.measure_type_loads(now=NOW, window=H, slack=H)["crawl"].delivered > 0
        compiled = delivered_query("sqlite", NOW, H).compile(dialect=store.engine.dialect)
        with store.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            plan = conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled.string}",
                tuple(compiled.construct_params()[name] for name in compiled.positiontup or ()),
            ).fetchall()
    finally:
        store.close()
    steps = [str(row[-1]) for row in plan]
    scans = [s for s in steps if "task_run" in s and s.startswith("SCAN") and "USING" not in s]
    assert not scans, steps
    assert any("ix_task_run_ended" in s for s in steps), steps


def _run_reads(url: str) -> tuple[int, int]:
    """``task_run``'s sequential and index scans so far (every backend but
    this one gone: a backend hands its counters over as it exits)."""
    with psycopg.connect(url, autocommit=True) as conn:

        def alone() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
            ).fetchone()
            return row is not None and row[0] == 0

        wait_until(alone, 30, "the store's connections to close")
        row = conn.execute(
            "SELECT seq_scan, idx_scan FROM pg_stat_user_tables WHERE relname = 'task_run'"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1] or 0)


@pytest.mark.postgresql
def test_the_monitor_and_health_never_scan_every_run_even_generic(postgres_url: str) -> None:
    store = SQLAlchemyStore.from_url(postgres_url)
    try:
        _old_runs(store)
    finally:
        store.close()
    url = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE task_run")
        conn.execute("ANALYZE task")
    generic = SQLAlchemyStore.from_url(
        f"{postgres_url}?options=-c%20plan_cache_mode%3Dforce_generic_plan"
    )
    before = _run_reads(url)
    try:
        settings = MonitorSettings()
        for minute in range(6):
            at = NOW + timedelta(minutes=5 * minute)
            monitor_tick(generic, at, settings=settings)
            generic.schedule_health(now=at)
            generic.schedule_health(now=at, counts=False, runs=False, queued_upto=1000)
    finally:
        generic.close()
    after = _run_reads(url)
    assert after[1] > before[1]  # the runs were read, by index
    assert after[0] == before[0], "task_run was scanned whole"
