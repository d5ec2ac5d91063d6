"""The writes scenario's arithmetic: PostgreSQL's counters to figures per run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks import results
from benchmarks.whole.writes import normalised, per_run, writes_rows


def counters() -> dict[str, object]:
    statements = [
        # (role, query, calls, rows, wal bytes)
        ("swh_worker", "WITH r AS (SELECT 1) UPDATE task_run SET status = $1", 100, 100, 90_000),
        ("swh_listener", "BEGIN", 10, 0, 0),
        ("swh_listener", "COMMIT", 10, 0, 0),
        ("swh_listener", "UPDATE task SET status = $1 WHERE id = $2", 100, 100, 70_000),
        ("swh_listener", "SELECT * FROM task_run WHERE backend_id IN ($1::VARCHAR)", 4, 4, 0),
        (
            "swh_listener",
            "SELECT * FROM task_run WHERE backend_id IN ($1::VARCHAR, $2::VARCHAR)",
            6,
            12,
            0,
        ),
        ("swh_runner", "INSERT INTO task_run (id) VALUES ($1)", 1, 100, 50_000),
        ("postgres", "SELECT count(*) FROM task_run", 30, 30, 0),
    ]
    return {
        "statements": statements,
        "xact_commit": 150,  # 10 listener commits, 100 autocommit starts, 30 harness reads, …
        "wal": (4000, 2, 400_000, 120, 110),
        "tables": [("task", 0, 200, 50, 0), ("task_run", 100, 100, 0, 0), ("worker", 0, 0, 0, 0)],
    }


def test_per_run_attributes_statements_to_parts_and_divides_by_runs() -> None:
    figures = per_run(counters(), 100)
    listener = figures["parts"]["listener"]
    assert listener == {
        "statements": (100 + 4 + 6) / 100,
        "commits": 10 / 100,
        "rows_written": 1.0,
        "wal_bytes": 700.0,
    }
    assert figures["parts"]["worker"]["rows_written"] == 1.0  # a writing WITH
    assert figures["parts"]["runner"]["statements"] == 0.01
    total = figures["total"]
    assert total["commits"] == (150 - 30) / 100  # the harness's reads left out
    assert total["rows_written"] == 4.0  # 200 task updates, 100 run inserts, 100 run updates
    assert total["wal_bytes"] == 4000.0
    assert total["statements"] == (100 + 110 + 1) / 100
    detail = figures["detail"]
    assert "worker" not in detail["tables"]  # nothing written there
    assert detail["wal"]["flushes"] == 1.1
    # the two lengths of one IN list are one statement
    selects = [s for s in detail["statements"]["listener"] if s["query"].startswith("SELECT")]
    assert selects == [
        {
            "query": "SELECT * FROM task_run WHERE backend_id IN (…)",
            "calls": 0.1,
            "rows": 0.16,
            "wal_bytes": 0.0,
        }
    ]


def test_statement_kinds() -> None:
    assert writes_rows("UPDATE task SET status = $1")
    assert writes_rows("  insert into task_run (id) values ($1)")
    assert writes_rows("WITH r AS (SELECT 1) UPDATE task_run SET status = $1 FROM r")
    assert not writes_rows("WITH r AS (SELECT 1) SELECT * FROM r")
    assert not writes_rows("SELECT * FROM task FOR UPDATE")
    assert normalised("a  IN ($1::BIGINT, $2::BIGINT)\n b") == "a IN (…) b"
    assert (
        normalised('x IN ($1::VARCHAR COLLATE "C", $2::VARCHAR COLLATE "C") FOR') == "x IN (…) FOR"
    )


def test_a_line_s_detail_is_not_a_parameter() -> None:
    record = {"scenario": "writes", "measurement": "wal_bytes", "part": "total", "detail": {}}
    assert results.identity(record) == ("writes", "wal_bytes", "part=total")
