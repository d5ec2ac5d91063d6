"""claim: time of ``store.claim_ready_tasks(type, now, limit=1000)`` with
10k, 1M and 10M tasks in the table, of which only a few thousand are due."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

from ..common import (
    Context,
    bench_type,
    fill_tasks,
    log,
    ratio,
    raw,
    reset_tasks,
    scratch_store,
    unique_queue,
    utcnow,
)

SIZES = (10_000, 1_000_000, 10_000_000)
QUICK_SIZES = (10_000, 100_000)
BATCH = 1000
#: claims per repetition (each takes a fresh BATCH among the due rows)
CLAIMS = 4
#: due rows in every table, whatever its size
DUE = BATCH * CLAIMS


def plan_of(store: object, now: object) -> str:
    """The index the ready query of a claim uses (EXPLAIN, for the record)."""
    rows = raw(
        store,  # type: ignore[arg-type]
        "EXPLAIN SELECT id FROM task WHERE type = 'bench' AND status = 'waiting'"
        " AND priority = 'normal' AND next_run <= %s ORDER BY deadline, id LIMIT 1000",
        (now,),
    )
    return " / ".join(r[0].strip() for r in rows if "Scan" in r[0] or "Sort" in r[0])


def measure(ctx: Context, count: int) -> tuple[list[float], int, str]:
    """Milliseconds of each claim (``ctx.repeat`` x CLAIMS of them)."""
    samples: list[float] = []
    with scratch_store(ctx.postgres, "swh_bench_claim") as store:
        bench_type(store, unique_queue("claim"), max_queue_length=None)
        now = utcnow()
        started = time.perf_counter()
        fill_tasks(store, count, now=now, due=DUE, progress=count >= 1_000_000)
        due = raw(store, "SELECT count(*) FROM task WHERE next_run <= %s", (now,))[0][0]
        log(f"claim: {count:,} tasks ({due:,} due) filled in {time.perf_counter() - started:.1f}s")
        plan = plan_of(store, now)
        for attempt in range(ctx.repeat):
            if attempt:
                reset_tasks(store)
            at = now + timedelta(seconds=1)
            for _ in range(CLAIMS):
                begin = time.perf_counter()
                claimed = store.claim_ready_tasks("bench", now=at, limit=BATCH)
                samples.append((time.perf_counter() - begin) * 1000)
                assert len(claimed) == BATCH, f"claimed {len(claimed)} of {BATCH}"
            log(f"claim {count:,} #{attempt}: " + ", ".join(f"{s:.1f}" for s in samples[-CLAIMS:]))
    return samples, due, plan


def run(ctx: Context) -> None:
    sizes = QUICK_SIZES if ctx.quick else SIZES
    base: float | None = None
    for count in sizes:
        samples, due, plan = measure(ctx, count)
        median = statistics.median(samples)
        base = median if base is None else base
        ctx.measurement(
            "claim",
            "claim_1000",
            "ms",
            samples,
            ratios={f"vs_{sizes[0]}": ratio(median, base)},
            digits=1,
            tasks=count,
            due=due,
            plan=plan,
        )
