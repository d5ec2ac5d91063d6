"""The monitor's load measure reads the runs of its window, not every run
the table keeps: every 5 minutes, on a table that grows by a run per
dispatch. Its ``delivered`` part was one ``OR`` of "ended in the window"
and "still going", which no index serves: PostgreSQL's generic plan and
SQLite both scanned ``task_run``. Checked on a table of old runs, with
PostgreSQL's statistics taken and its plan made generic (as a statement
prepared by the driver becomes after five runs)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg

from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
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
