"""The hot statements of a run's start find their rows by key, whatever
the statistics say.

The planner knew only the statistics taken before a burst was dispatched
(every task waiting then). Written ``status = 'scheduled'``, the start
guard's test proved the predicate of ``ix_task_in_flight``, which the
planner then expected to hold one row: every start scanned every task in
flight (1.7 ms of PostgreSQL's CPU per start with 3,000 in flight,
measured). The listener's batch of starts did the same with
``ix_task_run_queued`` (17.6 ms a batch of 300 with 50,000 queued, against
4.4 ms by backend id). Checked with the custom and the generic plan the
driver can get."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.sql_guard import _FIRST_COPY

pytestmark = pytest.mark.postgresql
IN_FLIGHT = 400
NAMES = ("backend_id", "node", "name", "tag", "worker", "pid")


def burst_on_stale_statistics(url: str) -> list[str]:
    """``IN_FLIGHT`` tasks dispatched after the only ANALYZE, taken while
    every one of them was waiting: their runs' backend ids."""
    store = SQLAlchemyStore.from_url(url)
    now = datetime.now(UTC)
    store.create_task_type(TaskType(type="crawl", backend_name="tests.crawl"))
    tasks = [
        Task(
            type="crawl",
            args=(n,),
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=timedelta(hours=1),
            next_run=now - timedelta(minutes=1),
            deadline=now + timedelta(hours=1),
        )
        for n in range(IN_FLIGHT)
    ]
    store.create_tasks(tasks, now=now)
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        # no autovacuum may refresh them while the test runs
        conn.execute("ALTER TABLE task SET (autovacuum_enabled = false)")
        conn.execute("ANALYZE task")
    claimed = store.claim_ready_tasks("crawl", now=now, limit=IN_FLIGHT)
    store.close()
    assert len(claimed) == IN_FLIGHT
    return [c.backend_id for c in claimed]


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
def test_the_guard_reads_its_task_by_primary_key_after_a_burst(
    postgres_url: str, mode: str
) -> None:
    backend_ids = burst_on_stale_statistics(postgres_url)
    sql = str(_FIRST_COPY.text)
    for n, name in enumerate(NAMES, 1):
        sql = re.sub(rf"(?<!:):{name}\b", f"${n}", sql)
    values = (backend_ids[-1], "node", "w", "tag-1", "w@node", 1)
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, cursor_factory=psycopg.ClientCursor) as conn:
        conn.execute(f"SET plan_cache_mode = {mode}")
        conn.execute(f"PREPARE guard (text, text, text, text, text, integer) AS {sql}")
        plan = "\n".join(
            str(row[0])
            for row in conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF) EXECUTE guard (%s, %s, %s, %s, %s, %s)", values
            )
        )
        conn.rollback()  # (the start it granted is not kept)
    assert "Index Scan using pk_task on task" in plan, plan
    assert "ix_task_in_flight" not in plan, plan
    # the guard did grant the start (one row updated, none left aside)
    assert re.search(r"Update on task_run .*rows=1 ", plan), plan
    assert "Rows Removed" not in plan, plan


def test_the_listener_marks_runs_started_by_backend_id_after_a_burst(postgres_url: str) -> None:
    """The listener's batch of starts filters the runs it finds by their
    backend ids on ``status``; that filter must not send the planner to
    every queued run through ``ix_task_run_queued``."""
    backend_ids = burst_on_stale_statistics(postgres_url)
    store = SQLAlchemyStore.from_url(postgres_url)
    seen: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.startswith("UPDATE task_run SET"):
            seen.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", keep)
    try:
        now = datetime.now(UTC)
        started = store.start_task_runs([(b, now, "w@node") for b in backend_ids[:100]])
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", keep)
        store.close()
    assert {r.status.value for r in started.values()} == {"started"}
    [(statement, parameters)] = seen
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, cursor_factory=psycopg.ClientCursor) as conn:
        plan = "\n".join(
            str(row[0]) for row in conn.execute("EXPLAIN (COSTS OFF) " + statement, parameters)
        )
        conn.rollback()
    assert "task_run" in plan, plan
    assert "ix_task_run_queued" not in plan, plan
