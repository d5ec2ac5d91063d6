"""visits: the origin-visit scheduler on PostgreSQL.

* ``record``: ``record_listed_origins`` in pages of 1,000 (origins/s), a
  page of the smallest world as the baseline;
* per world size (100k, 1M and 10M origins; ``--quick``: 10k and 100k;
  ``SWH_BENCH_VISITS_SIZES=100000,1000000``: those), filled by SQL (a lister
  whose last listing just ended, its origins with and without a forge date,
  a third of them never visited, the others with statistics of every
  outcome):
  ``peek_next_visits`` of 1,000 per policy (``first_visits_after_listing``:
  of that lister; seconds; the ratio against the
  smallest world is the growth the issue bounds at 1.2 times from 100k to 10M)
  and whether its plan reads ``listed_origin`` or ``origin_visit_stats`` by a
  sequential scan; ``grab_next_visits`` of 1,000 per policy (it marks
  what it takes: each repetition takes the next ones); ``update_metrics``
  (seconds); and ``record_listed_origins`` again into the largest world.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import defaultdict
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import ListedOrigin
from swh_like_scheduler.visits.policy import Cooldowns, VisitPolicy

from ..common import Context, log, ratio, raw, scratch_store, utcnow

SIZES = (100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (10_000, 100_000)
COUNT = 1000
#: every policy (first_visits_after_listing with the world's lister: :func:`of_lister`)
POLICIES = list(VisitPolicy)


def sizes(quick: bool) -> tuple[int, ...]:
    """The world sizes: ``SWH_BENCH_VISITS_SIZES`` (comma-separated, the
    first is the baseline) if set, else by ``--quick``."""
    given = os.environ.get("SWH_BENCH_VISITS_SIZES", "").strip()
    if given:
        return tuple(int(size) for size in given.split(","))
    return QUICK_SIZES if quick else SIZES


def of_lister(policy: VisitPolicy, lister: str) -> str | None:
    """The lister a grab of ``policy`` names: the world's for the policy
    that needs one, none for the others (every lister's origins)."""
    return lister if policy is VisitPolicy.FIRST_VISITS_AFTER_LISTING else None


def fill(store: SQLAlchemyStore, lister: str, start: int, stop: int) -> None:
    """Origins ``start`` to ``stop``: every third without a forge date, a third
    never visited, the others visited 1 to 40 days ago, a seventh of them
    failing since a success 100 days ago (the largest lags: the top of the
    lag policy's order), held while their failure is under 14 days old (as
    grabs leave them, store/sql_grab.py); the lister's last listing ends now
    (``first_visits_after_listing`` takes its origins not scheduled since)."""
    raw(
        store,
        """
        INSERT INTO listed_origin (lister_id, url, visit_type, extra_loader_arguments, enabled,
                                   first_seen, last_seen, last_update)
        SELECT %(lister)s, 'https://forge.example/p' || n, 'git', '{}'::jsonb, n %% 50 <> 0,
               now() - interval '60 days', now(),
               CASE WHEN n %% 3 = 0 THEN NULL ELSE now() - (n %% 1000) * interval '1 hour' END
        FROM generate_series(%(start)s, %(stop)s - 1) AS n
        """,
        {"lister": lister, "start": start, "stop": stop},
    )
    raw(
        store,
        """
        INSERT INTO origin_visit_stats (url, visit_type, last_successful, last_visit,
            last_visit_status, last_scheduled, last_snapshot, next_visit_queue_position,
            next_position_offset, successive_visits, next_visit_due,
            enabled, first_seen, last_update, lister_id, held, held_since)
        SELECT 'https://forge.example/p' || n, 'git',
               CASE WHEN n %% 7 <> 0 THEN now() - (n %% 40) * interval '1 day'
                    ELSE now() - interval '100 days' END,
               now() - (n %% 40) * interval '1 day',
               CASE WHEN n %% 7 = 0 THEN 'failed' ELSE 'successful' END,
               now() - (n %% 40) * interval '1 day' - interval '1 hour',
               CASE WHEN n %% 7 <> 0 THEN lpad(to_hex(n), 40, '0') END,
               now() - (n %% 40) * interval '1 day' + (1 << (n %% 10)) * interval '1 hour',
               n %% 10, 1,
               now() - (n %% 40) * interval '1 day' + (1 << (n %% 10)) * interval '1 hour',
               n %% 50 <> 0, now() - interval '60 days',
               CASE WHEN n %% 3 = 0 THEN NULL ELSE now() - (n %% 1000) * interval '1 hour' END,
               %(lister)s,
               CASE WHEN n %% 7 = 0 AND n %% 40 < 14 THEN 'failed' END,
               CASE WHEN n %% 7 = 0 AND n %% 40 < 14 THEN now() - (n %% 40) * interval '1 day' END
        FROM generate_series(%(start)s, %(stop)s - 1) AS n
        WHERE n %% 3 <> 1
        """,
        {"lister": lister, "start": start, "stop": stop},
    )
    raw(  # never visited: the listing's row only (store/sql_origins.py)
        store,
        """
        INSERT INTO origin_visit_stats (url, visit_type, next_position_offset,
            successive_visits, enabled, first_seen, last_update, lister_id)
        SELECT 'https://forge.example/p' || n, 'git', 4, 1, n %% 50 <> 0,
               now() - interval '60 days',
               CASE WHEN n %% 3 = 0 THEN NULL ELSE now() - (n %% 1000) * interval '1 hour' END,
               %(lister)s
        FROM generate_series(%(start)s, %(stop)s - 1) AS n
        WHERE n %% 3 = 1
        """,
        {"lister": lister, "start": start, "stop": stop},
    )
    raw(
        store,
        "UPDATE lister SET last_listing_finished_at = now() WHERE id = %(lister)s",
        {"lister": lister},
    )
    raw(store, "ANALYZE listed_origin")
    raw(store, "ANALYZE origin_visit_stats")


def _seq_scan_counts(store: SQLAlchemyStore) -> dict[str, int]:
    rows = raw(
        store,
        "SELECT relname, seq_scan FROM pg_stat_user_tables "
        "WHERE relname IN ('listed_origin', 'origin_visit_stats')",
    )
    return {name: int(count) for name, count in rows}


def seq_scans(store: SQLAlchemyStore, policy: VisitPolicy, lister: str) -> list[str]:
    """The tables the policy's statement reads by a sequential scan (the
    server's counters; a backend reports them at the latest when it exits:
    the store's connections are closed before reading them)."""
    store.engine.dispose()
    time.sleep(0.5)
    before = _seq_scan_counts(store)
    store.peek_next_visits("git", COUNT, policy, lister_id=of_lister(policy, lister))
    store.engine.dispose()
    time.sleep(0.5)
    after = _seq_scan_counts(store)
    return sorted(name for name in after if after[name] > before.get(name, 0))


def timed(ctx: Context, call: Any) -> list[float]:
    samples = []
    for _ in range(ctx.repeat):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def run(ctx: Context) -> None:
    worlds = sizes(ctx.quick)
    with scratch_store(ctx.postgres, "swh_bench_visits") as store:
        store.create_task_type(
            TaskType(type="load-git", backend_name="loader.git", default_interval=timedelta(days=1))
        )
        lister = str(store.get_or_create_lister("bench").id)
        recorder = str(store.get_or_create_lister("bench", "recorded").id)
        pages = 5 if ctx.quick else 20
        record(ctx, store, recorder, 0, pages, size=0)
        baseline: dict[str, float] = {}
        filled = 0
        for size in worlds:
            log(f"visits: filling to {size:,} origins")
            fill(store, lister, filled, size)
            filled = size
            for policy in POLICIES:
                at = of_lister(policy, lister)
                samples = timed(
                    ctx,
                    lambda p=policy, at=at: store.peek_next_visits("git", COUNT, p, lister_id=at),
                )
                median = statistics.median(samples)
                baseline.setdefault(policy.value, median)
                ctx.measurement(
                    "visits",
                    "peek_next_visits",
                    "s",
                    samples,
                    ratios={f"vs {worlds[0]:,}": ratio(median, baseline[policy.value])},
                    size=size,
                    policy=policy.value,
                    seq_scans=seq_scans(store, policy, lister),
                )
            for policy in POLICIES:
                at = of_lister(policy, lister)
                samples = timed(
                    ctx,
                    lambda p=policy, at=at: store.grab_next_visits("git", COUNT, p, lister_id=at),
                )
                median = statistics.median(samples)
                baseline.setdefault(f"grab {policy.value}", median)
                ctx.measurement(
                    "visits",
                    "grab_next_visits",
                    "s",
                    samples,
                    ratios={f"vs {worlds[0]:,}": ratio(median, baseline[f"grab {policy.value}"])},
                    size=size,
                    policy=policy.value,
                )
            if size == worlds[-1]:
                where_it_goes(ctx, store, lister, size)
            samples = timed(ctx, lambda: store.update_metrics(now=utcnow()))
            median = statistics.median(samples)
            baseline.setdefault("update_metrics", median)
            ctx.measurement(
                "visits",
                "update_metrics",
                "s",
                samples,
                ratios={f"vs {worlds[0]:,}": ratio(median, baseline["update_metrics"])},
                size=size,
            )
        record(ctx, store, recorder, pages, pages, size=filled)


def record(
    ctx: Context, store: SQLAlchemyStore, lister: str, first: int, pages: int, *, size: int
) -> None:
    """``record_listed_origins`` of ``pages`` new pages of 1,000 (origins/s)."""
    rates = []
    for page in range(first, first + pages):
        origins = [
            ListedOrigin(lister, f"https://other.example/r{page * 1000 + n}", "git")
            for n in range(1000)
        ]
        started = time.perf_counter()
        store.record_listed_origins(origins)
        rates.append(1000 / (time.perf_counter() - started))
    ctx.measurement("visits", "record_listed_origins", "origins/s", rates, pages=pages, world=size)


def where_it_goes(ctx: Context, store: SQLAlchemyStore, lister: str, size: int) -> None:
    """The largest world's profile: per policy, one more grab's seconds per
    statement, and the claim's plan with its buffers (EXPLAIN ANALYZE)."""
    for policy in POLICIES:
        spent = statement_seconds(store.engine)
        store.grab_next_visits("git", COUNT, policy, lister_id=of_lister(policy, lister))
        top = dict(sorted(spent.items(), key=lambda kv: -kv[1])[:4])
        sa.event.remove(store.engine, "before_cursor_execute", spent.before)
        sa.event.remove(store.engine, "after_cursor_execute", spent.after)
        ctx.note(
            "visits",
            profile="grab_next_visits",
            size=size,
            policy=policy.value,
            statements={k: round(v, 3) for k, v in top.items()},
            plan=claim_plan(store, policy, of_lister(policy, lister)),
        )


class Spent(defaultdict[str, float]):
    """Seconds per statement (its first words); ``before`` and ``after`` are
    its listeners (``sa.event.remove`` them to stop counting)."""

    def before(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        conn.info["started"] = time.perf_counter()

    def after(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        words = " ".join(statement.split())
        self[words[:70]] += time.perf_counter() - conn.info.pop("started")


def statement_seconds(engine: sa.Engine) -> Spent:
    """Seconds spent per statement, from now on."""
    spent = Spent(float)
    sa.event.listen(engine, "before_cursor_execute", spent.before)
    sa.event.listen(engine, "after_cursor_execute", spent.after)
    return spent


def claim_plan(store: Any, policy: VisitPolicy, lister_id: str | None = None) -> list[str]:
    """The claim's plan, run (EXPLAIN ANALYZE, BUFFERS)."""
    with store.engine.connect() as conn:
        query = store._claim_query(
            conn,
            "git",
            COUNT,
            policy,
            now=utcnow(),
            lister_id=lister_id,
            enabled=True,
            cooldowns=Cooldowns(),
        )
        text = str(query.compile(store.engine, compile_kwargs={"literal_binds": True}))
    return [r[0] for r in raw(store, f"EXPLAIN (ANALYZE, BUFFERS) {text}")]
