"""Statements run often become generic plans (PostgreSQL, after five runs of
a prepared statement): one whose partial index predicate is only proven by
bound values then loses the index. Measured: creating 100k tasks went from
15 s to 76 s once autovacuum had analysed the table (each batch's duplicate
lookup read the whole table). Each such lookup is checked under
``plan_cache_mode = force_generic_plan``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.sql_tasks import identical_query

pytestmark = pytest.mark.postgresql
NOW = datetime(2026, 3, 1, tzinfo=UTC)


def test_the_duplicate_lookup_keeps_its_index_in_a_generic_plan(postgres_url: str) -> None:
    store = SQLAlchemyStore.from_url(postgres_url)
    store.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
    tasks = [
        Task(
            type="crawl",
            args=(n,),
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=timedelta(hours=1),
            next_run=NOW,
            deadline=NOW,
        )
        for n in range(5000)
    ]
    created = store.create_tasks(tasks, now=NOW)
    digests = [t.arguments_hash for t in created[:3]]
    store.close()
    plan = generic_plan(postgres_url, identical_query("crawl", digests))
    assert "ux_task_identical" in plan, plan


def generic_plan(url: str, query: Any) -> str:
    """The generic plan of ``query``: its bound values as the parameters
    (``$1``, ``$2``...) of a prepared statement, as the driver sends them."""
    compiled = query.compile(
        dialect=pg_psycopg.dialect(), compile_kwargs={"render_postcompile": True}
    )
    sql, values = compiled.string, []
    for name, value in compiled.params.items():
        values.append(value)
        sql = sql.replace(f"%({name})s", f"${len(values)}")
    types = ", ".join("text" for _ in values)
    url = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE task")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE lookup ({types}) AS {sql}")
        given = ", ".join(f"'{v}'" for v in values)
        rows = conn.execute(f"EXPLAIN EXECUTE lookup({given})").fetchall()
    return "\n".join(str(r[0]) for r in rows)
