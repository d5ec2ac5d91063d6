"""upgrade: what each schema migration costs on a big database (PostgreSQL).

A scratch database is brought to revision 0001 only, by the project's own
entry point (:func:`swh_like_scheduler.store.migrations.upgrade`, what
``swh scheduler db upgrade --revision REV`` runs), and filled at that
revision with N tasks (100,000 with ``--quick``, else 1,000,000) and one
ended run per task, by ``INSERT … SELECT generate_series`` (adaptive
tasks of one type, waiting, each with its own arguments; runs ended a day
ago), then ``VACUUM ANALYZE`` (a live database's tables are vacuumed).
That database is the template of each repetition: a copy of it is upgraded
one revision at a time to the head, each step timed (wall seconds of its
transaction, Alembic's start-up included).

Baseline in the same run: the same step-by-step upgrade of an EMPTY
database at 0001 (``vs_empty`` = seconds with N tasks / seconds empty).
One line per revision, then ``total`` (the sum of the steps). The origin
tables (0013 on) stay empty: 0014 and 0023 are measured without origins.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import psycopg

from swh_like_scheduler.store import make_engine, migrations

from ..common import Context, create_database, database_url, drop_database, log, ratio, utcnow

TASKS = 1_000_000
QUICK_TASKS = 100_000
#: the revision the database is filled at
BASE = "0001"

_TASK_TYPE = """
INSERT INTO task_type (type, description, backend_name, queue, default_interval,
                       min_interval, max_interval, backoff_factor, retry_delay,
                       retry_growth, retry_cap, retry_jitter)
VALUES ('bench', 'upgrade benchmark', 'bench.noop', 'swh-bench-upgrade', '1 day',
        '1 hour', '30 days', 2, '1 minute', 2, '1 hour', '0')
"""
#: task n: its own arguments (and digest), due within the next day
_TASKS = """
INSERT INTO task (type, arguments, arguments_hash, schedule_kind, status, priority,
                  next_run, deadline, current_interval, blackout_periods,
                  dont_run_on_nodes, last_good_start_at, last_good_end_at, last_start_at,
                  last_end_at, average_good_duration, created_at, updated_at)
SELECT 'bench',
       jsonb_build_object('args', jsonb_build_array(n),
                          'kwargs', jsonb_build_object('url', 'https://forge.example/' || n)),
       encode(sha256(convert_to('https://forge.example/' || n, 'UTF8')), 'hex'),
       'adaptive', 'waiting', 'normal',
       %(now)s + make_interval(secs => mod(n * 7919, 86400)),
       %(now)s + make_interval(secs => mod(n * 7919, 86400)) + interval '1 day',
       interval '1 day', '[]'::jsonb, '[]'::jsonb,
       %(now)s - interval '1 day' + make_interval(secs => mod(n, 3600)),
       %(now)s - interval '1 day' + make_interval(secs => mod(n, 3600) + 60),
       %(now)s - interval '1 day' + make_interval(secs => mod(n, 3600)),
       %(now)s - interval '1 day' + make_interval(secs => mod(n, 3600) + 60),
       interval '1 minute', %(now)s - interval '30 days',
       %(now)s - interval '1 day' + make_interval(secs => mod(n, 3600) + 60)
FROM generate_series(1, %(count)s::bigint) AS n
"""
#: one ended run per task (backend ids: distinct UUIDs)
_RUNS = """
INSERT INTO task_run (task_id, backend_id, slot, scheduled, started, ended, status,
                      worker, history)
SELECT id, md5('run-' || id)::uuid::text, last_start_at - interval '10 seconds',
       last_start_at - interval '10 seconds', last_start_at, last_end_at, 'eventful',
       'bench@host', '[]'::jsonb
FROM task
"""


def revisions() -> list[str]:
    """The revisions after :data:`BASE`, oldest first, as Alembic reads the scripts."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(migrations.alembic_config())
    found = [script.revision for script in scripts.walk_revisions()][::-1]
    assert found[0] == BASE and found[-1] == migrations.head_revision(), found
    return found[1:]


def _upgrade(url: str, revision: str) -> float:
    """Seconds ``migrations.upgrade(…, revision)`` takes (its engine opened before)."""
    engine = make_engine(url, role="cli")
    try:
        started = time.perf_counter()
        migrations.upgrade(engine, revision)
        took = time.perf_counter() - started
        assert migrations.current_revision(engine) == revision
        return took
    finally:
        engine.dispose()


def _fill(url: str, count: int, now: datetime) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_TASK_TYPE)
        started = time.perf_counter()
        conn.execute(_TASKS, {"now": now, "count": count})
        log(f"  {count:,} tasks in {time.perf_counter() - started:.1f}s")
        started = time.perf_counter()
        conn.execute(_RUNS)
        log(f"  {count:,} runs in {time.perf_counter() - started:.1f}s")
        conn.execute("VACUUM ANALYZE")
        rows = conn.execute("SELECT (SELECT count(*) FROM task), (SELECT count(*) FROM task_run)")
        assert rows.fetchone() == (count, count)


@contextmanager
def _templates(server: str, count: int) -> Iterator[dict[str, str]]:
    """Two databases at :data:`BASE`: ``empty`` and ``filled`` (``count`` tasks
    and runs), dropped on the way out."""
    prefix = f"swh_bench_upgrade_{os.getpid()}"
    names = {"empty": f"{prefix}_empty", "filled": f"{prefix}_filled"}
    try:
        for kind, name in names.items():
            create_database(server, name)
            _upgrade(database_url(server, name), BASE)
            if kind == "filled":
                started = time.perf_counter()
                _fill(database_url(server, name), count, utcnow())
                log(f"  filled at {BASE} in {time.perf_counter() - started:.1f}s")
        yield names
    finally:
        for name in names.values():
            drop_database(server, name)


def _steps(server: str, template: str, steps: list[str]) -> dict[str, float]:
    """A copy of ``template`` upgraded one revision at a time: seconds per step."""
    name = f"swh_bench_upgrade_{os.getpid()}_run"
    started = time.perf_counter()
    create_database(server, name, template)
    log(f"  copy of {template} in {time.perf_counter() - started:.1f}s")
    url = database_url(server, name)
    try:
        seconds = {}
        for revision in steps:
            seconds[revision] = _upgrade(url, revision)
            if seconds[revision] >= 1:
                log(f"  {revision}: {seconds[revision]:.1f}s")
        return seconds
    finally:
        drop_database(server, name)


def run(ctx: Context) -> None:
    count = QUICK_TASKS if ctx.quick else TASKS
    steps = revisions()
    samples: dict[str, dict[str, list[float]]] = {
        kind: {revision: [] for revision in [*steps, "total"]} for kind in ("empty", "filled")
    }
    log(f"upgrade {BASE} -> {steps[-1]}, one revision at a time: empty and {count:,} tasks")
    with _templates(ctx.postgres, count) as templates:
        for attempt in range(ctx.repeat):
            for kind, template in templates.items():
                log(f" attempt {attempt + 1}/{ctx.repeat}, {kind}")
                seconds = _steps(ctx.postgres, template, steps)
                for revision, took in seconds.items():
                    samples[kind][revision].append(took)
                samples[kind]["total"].append(sum(seconds.values()))
    for revision in [*steps, "total"]:
        filled = samples["filled"][revision]
        empty = statistics.median(samples["empty"][revision])
        ctx.measurement(
            "upgrade",
            revision,
            "s",
            filled,
            ratios={"vs_empty": ratio(statistics.median(filled), empty)},
            tasks=count,
            runs=count,
            empty_s=round(empty, 3),
        )
