"""writes: what each part of the platform writes to PostgreSQL per run, on
the end-to-end path (runner → a real ``celery worker`` → listener, as
:mod:`.end_to_end` runs it with the guarded body).

PostgreSQL's own counters are the instrument, so this scenario starts a
private server (``initdb`` on a free port, durable: ``fsync`` and
``synchronous_commit`` on, as in production) with ``pg_stat_statements``
preloaded; the shared one is never reconfigured. Each part connects as its
own database role (``swh_runner``, ``swh_worker``, ``swh_listener``, with
the same ``application_name``), because ``pg_stat_statements`` groups
statements by role; the harness's own reads run as ``postgres`` and are
left out.

Per repetition: the tasks are made due again, a fresh worker starts, the
counters are reset (``pg_stat_statements_reset``, ``pg_stat_reset``,
``pg_stat_reset_shared('wal')``) once the listener is up, the runs go
through, then every connection of the parts is closed (a backend hands its
counters over when it exits) and the counters are read:

* per part, from ``pg_stat_statements``: **statements** (calls other than
  ``BEGIN``/``COMMIT``/``ROLLBACK``), **commits** (``COMMIT`` calls; a
  statement sent in autocommit, as the start guard's, is its own
  transaction and shows up in the total only), **rows written** (rows of
  ``INSERT``/``UPDATE``/``DELETE`` statements, a writing ``WITH`` counted
  by its last statement) and **WAL bytes** of the statements;
* in total: transactions committed (``pg_stat_database.xact_commit``, the
  harness's own reads subtracted), rows written (``pg_stat_user_tables``
  inserts + updates + deletes, per table in the detail), WAL bytes and
  flushes (``pg_stat_wal``; beyond the statements' own: commit records,
  autovacuum, full-page images).

Every figure is divided by the number of runs. The detail of the ``total``
lines lists each part's statements (calls, rows and WAL bytes per run).
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from swh_like_scheduler.store import SQLAlchemyStore

from ..common import (
    GUARDED_TASK,
    Context,
    bench_type,
    broker_kind,
    celery_app,
    database_url,
    fill_tasks,
    log,
    purge,
    reset_tasks,
    scratch_store,
    start_postgres,
    unique_queue,
    utcnow,
)
from .end_to_end import OPEN_RUNS, ours, worker

TASKS = 5_000
QUICK_TASKS = 2_000
DATABASE = "swh_bench_writes"
#: the parts of the platform, each its own database role and application name
PARTS = ("runner", "worker", "listener")
METRICS = ("statements", "commits", "rows_written", "wal_bytes")
#: the private server's settings beyond initdb's defaults
SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "top",
    "pg_stat_statements.track_utility": "on",
    "pg_stat_statements.max": "10000",
    "track_wal_io_timing": "on",
}
_WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|COPY)\b", re.IGNORECASE)
_WRITING_WITH = re.compile(r"\b(INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.IGNORECASE)
_TRANSACTION = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|START TRANSACTION)\b", re.IGNORECASE)


def role(part: str) -> str:
    return f"swh_{part}"


def part_url(server_db: str, part: str) -> str:
    """``server_db`` (a database URL of the private server) as ``part``'s role."""
    rest = server_db.split("://", 1)[1].split("@", 1)[1]
    return f"postgresql://{role(part)}@{rest}?application_name=swh-{part}"


def writes_rows(query: str) -> bool:
    """Whether the rows a statement reports are rows it wrote."""
    if _WRITE.match(query):
        return True
    return query.lstrip().upper().startswith("WITH") and bool(_WRITING_WITH.search(query))


#: a list of bound values (``IN ($1::VARCHAR, $2::VARCHAR)``): one statement
#: whatever its length
_IN_LIST = re.compile(r'\bIN \((?:\$\d+(?:::[\w ]+)?(?: COLLATE "\w+")?(?:, )?)+\)')


def normalised(query: str) -> str:
    """``query`` on one line, its lists of bound values as ``IN (…)``."""
    return _IN_LIST.sub("IN (…)", " ".join(query.split()))


def short(query: str, head: int = 80, tail: int = 50) -> str:
    """The beginning and the end of a long statement (where they differ)."""
    return query if len(query) <= head + tail else f"{query[:head]} … {query[-tail:]}"


@contextmanager
def admin(url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


def reset_counters(url: str) -> None:
    with admin(url) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
        conn.execute("SELECT pg_stat_reset()")
        conn.execute("SELECT pg_stat_reset_shared('wal')")


def wait_disconnected(url: str, seconds: float = 30.0) -> None:
    """Until no part has a connection left (each backend hands over its
    counters when it exits)."""
    roles = [role(p) for p in PARTS]
    deadline = time.monotonic() + seconds
    with admin(url) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = ANY(%s)", (roles,)
            ).fetchone()
            if not row or not row[0]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{row[0]} connections of the parts still open")
            time.sleep(0.1)


def read_counters(url: str) -> dict[str, Any]:
    """Every counter the scenario reports (undivided), and the statements."""
    with admin(url) as conn:
        statements = conn.execute(
            "SELECT r.rolname, s.query, s.calls, s.rows, s.wal_bytes::bigint"
            " FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid"
            " WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()
        (xact_commit,) = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone() or (0,)
        wal = conn.execute(
            "SELECT wal_records, wal_fpi, wal_bytes::bigint, wal_write, wal_sync FROM pg_stat_wal"
        ).fetchone()
        tables = conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del"
            " FROM pg_stat_user_tables ORDER BY relname"
        ).fetchall()
    return {"statements": statements, "xact_commit": xact_commit, "wal": wal, "tables": tables}


def per_run(counters: dict[str, Any], runs: int) -> dict[str, Any]:
    """The scenario's figures per run: ``parts`` (part → metric → value),
    ``total`` (metric → value) and the detail (statements, tables, WAL)."""
    parts = {p: dict.fromkeys(METRICS, 0.0) for p in PARTS}
    grouped: dict[str, dict[str, list[int]]] = {p: {} for p in PARTS}
    harness = 0
    for rolname, query, calls, rows, wal_bytes in counters["statements"]:
        part = next((p for p in PARTS if role(p) == rolname), None)
        if part is None:
            harness += calls  # the harness's reads, each its own transaction
            continue
        figures = parts[part]
        if _TRANSACTION.match(query):
            if query.lstrip().upper().startswith("COMMIT"):
                figures["commits"] += calls
        else:
            figures["statements"] += calls
            sums = grouped[part].setdefault(normalised(query), [0, 0, 0])
            for i, value in enumerate((calls, rows, wal_bytes)):
                sums[i] += value
        if writes_rows(query):
            figures["rows_written"] += rows
        figures["wal_bytes"] += wal_bytes
    statements = {
        part: [
            {
                "query": short(query),
                "calls": round(calls / runs, 3),
                "rows": round(rows / runs, 3),
                "wal_bytes": round(wal_bytes / runs, 1),
            }
            for query, (calls, rows, wal_bytes) in sorted(
                found.items(), key=lambda item: (-item[1][0], item[0])
            )
        ]
        for part, found in grouped.items()
    }
    records, fpi, wal_bytes, wal_write, wal_sync = counters["wal"]
    tables = {
        name: {"ins": ins / runs, "upd": upd / runs, "hot_upd": hot / runs, "del": dele / runs}
        for name, ins, upd, hot, dele in counters["tables"]
        if ins or upd or dele
    }
    total = {
        "statements": sum(f["statements"] for f in parts.values()),
        "commits": max(0, counters["xact_commit"] - harness),
        "rows_written": sum(t["ins"] + t["upd"] + t["del"] for t in tables.values()) * runs,
        "wal_bytes": wal_bytes,
    }
    return {
        "parts": {p: {m: v / runs for m, v in f.items()} for p, f in parts.items()},
        "total": {m: v / runs for m, v in total.items()},
        "detail": {
            "statements": statements,
            "tables": {n: {k: round(v, 3) for k, v in t.items()} for n, t in tables.items()},
            "wal": {
                "records": round(records / runs, 2),
                "full_page_images": round(fpi / runs, 3),
                "writes": round(wal_write / runs, 3),
                "flushes": round(wal_sync / runs, 3),
            },
        },
    }


def counted_run(
    server: str, db_url: str, app: Any, broker: str, queue: str, count: int
) -> tuple[float, dict[str, Any]]:
    """One repetition: seconds and the figures per run (:func:`per_run`)."""
    runner = SQLAlchemyStore.from_url(part_url(db_url, "runner"))
    listener = SQLAlchemyStore.from_url(part_url(db_url, "listener"))
    watch = psycopg.connect(db_url, autocommit=True)

    def still_open() -> int:
        row = watch.execute(OPEN_RUNS).fetchone()
        return int(row[0]) if row else 0

    try:
        with worker(broker, queue, app, part_url(db_url, "worker")):
            seconds = ours(
                runner,
                app,
                count,
                listener_store=listener,
                still_open=still_open,
                on_ready=lambda: reset_counters(db_url),
            )
    finally:
        runner.close()
        listener.close()
        watch.close()
    wait_disconnected(db_url)
    return seconds, per_run(read_counters(db_url), count)


def run(ctx: Context) -> None:
    count = QUICK_TASKS if ctx.quick else TASKS
    server = start_postgres(durable=True, settings=SETTINGS)
    with admin(server) as conn:
        for part in PARTS:
            conn.execute(f"CREATE ROLE {role(part)} LOGIN SUPERUSER")
    broker = ctx.amqp or ctx.redis
    kind = broker_kind(broker)
    app = celery_app(broker, worker_send_task_events=True, task_send_sent_event=False)
    queue = unique_queue("writes")
    samples: list[tuple[float, dict[str, Any]]] = []
    with scratch_store(server, DATABASE) as store:
        db_url = database_url(server, DATABASE)
        with admin(db_url) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        bench_type(store, queue, max_queue_length=count)
        store.update_task_type("bench", backend_name=GUARDED_TASK)
        fill_tasks(store, count, now=utcnow())
        try:
            for attempt in range(ctx.repeat):
                reset_tasks(store, due_at=utcnow())
                seconds, figures = counted_run(server, db_url, app, broker, queue, count)
                samples.append((seconds, figures))
                total = figures["total"]
                log(
                    f"writes {kind} {count:,} #{attempt}: {count / seconds:,.0f} tasks/s; per run "
                    + ", ".join(f"{m} {total[m]:,.2f}" for m in METRICS)
                )
        finally:
            purge(app, queue)
    params = {"broker": kind, "tasks": count}
    # the repetition with the median WAL bytes gives the detail
    middle = sorted(samples, key=lambda s: s[1]["total"]["wal_bytes"])[len(samples) // 2][1]
    for metric in METRICS:
        for part in (*PARTS, "total"):
            values = [f["total" if part == "total" else "parts"] for _, f in samples]
            series = [v[metric] if part == "total" else v[part][metric] for v in values]
            extra = (
                {"detail": middle["detail"]} if part == "total" and metric == "wal_bytes" else {}
            )
            ctx.measurement(
                "writes",
                metric,
                "per run",
                series,
                digits=3 if metric != "wal_bytes" else 1,
                part=part,
                **params,
                **extra,
            )
    rates = [count / s for s, _ in samples]
    ctx.measurement("writes", "rate", "tasks/s", rates, digits=0, part="total", **params)
    log(f"writes: median {statistics.median(rates):,.0f} tasks/s on the private server")
