"""backlog: a backlog of N ready tasks claimed to the last by one claimer
(``store.claim_ready_tasks``, chunks of 5,000, as the runner claims), or by
three at once (three stores, each its own engine, as three runners), with
the planner's statistics fresh and with them deliberately absent (as right
after a bulk ``create_tasks``, before autovacuum analyses the table)."""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from swh_like_scheduler.store import SQLAlchemyStore

from ..common import (
    Context,
    bench_type,
    fill_tasks,
    log,
    ratio,
    raw,
    scratch_store,
    unique_queue,
    utcnow,
)

SIZES = (10_000, 50_000, 200_000)
QUICK_SIZES = (10_000, 50_000)
CHUNK = 5000


#: the variants: (name, claimers, statistics fresh)
VARIANTS = (
    ("analysed", 1, True),
    ("no_stats", 1, False),
    ("three_analysed", 3, True),
    ("three_no_stats", 3, False),
)


def claim_all(store: SQLAlchemyStore, now: datetime) -> tuple[int, float]:
    """Claim until nothing is left: (tasks claimed, longest claim in s)."""
    longest, claimed = 0.0, 0
    while True:
        begin = time.perf_counter()
        got = len(store.claim_ready_tasks("bench", now=now, limit=CHUNK))
        longest = max(longest, time.perf_counter() - begin)
        claimed += got
        if not got:
            return claimed, longest


def drain(ctx: Context, count: int, *, stats: bool, claimers: int = 1) -> tuple[float, float]:
    """(seconds to claim every task, seconds of the longest claim)."""
    with scratch_store(ctx.postgres, "swh_bench_backlog") as store:
        bench_type(store, unique_queue("backlog"), max_queue_length=None)
        now = utcnow()
        raw(store, "ALTER TABLE task SET (autovacuum_enabled = false)")
        fill_tasks(store, count, now=now)
        if not stats:  # as if never analysed (superuser: the benchmark's own server)
            raw(store, "DELETE FROM pg_statistic WHERE starelid = 'task'::regclass")
            raw(store, "UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE relname = 'task'")
        url = store.engine.url.render_as_string(hide_password=False)
        peers = [SQLAlchemyStore.from_url(url) for _ in range(claimers - 1)]
        try:
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=claimers) as pool:
                done = list(pool.map(lambda s: claim_all(s, now), [store, *peers]))
            seconds = time.perf_counter() - started
        finally:
            for peer in peers:
                peer.close()
        claimed = sum(n for n, _ in done)
        longest = max(worst for _, worst in done)
        assert claimed == count, f"claimed {claimed} of {count}"
        return seconds, longest


def run(ctx: Context) -> None:
    for count in QUICK_SIZES if ctx.quick else SIZES:
        totals: dict[str, list[float]] = {name: [] for name, _, _ in VARIANTS}
        longest: dict[str, list[float]] = {name: [] for name, _, _ in VARIANTS}
        for attempt in range(ctx.repeat):
            for name, claimers, fresh in VARIANTS:
                seconds, worst = drain(ctx, count, stats=fresh, claimers=claimers)
                totals[name].append(seconds)
                longest[name].append(worst)
                log(f"backlog {count:,} {name} #{attempt}: {seconds:.2f}s, longest {worst:.2f}s")
        base = statistics.median(totals["analysed"])
        for name, samples in totals.items():
            ctx.measurement(
                "backlog",
                name,
                "s",
                samples,
                ratios={"vs_analysed": ratio(statistics.median(samples), base)},
                digits=2,
                tasks=count,
                longest_claim_s=round(max(longest[name]), 2),
            )
