"""``first_visits_after_listing`` deep into a listing: ``python -m
benchmarks.profile_first_visits [SIZE]`` fills the benchmark's world
(:func:`benchmarks.visits.visits.fill`, one lister whose listing just
ended), then prints, as JSON lines, the seconds of three grabs of 1,000 of
that lister's origins: in the fresh world, once the first 100k and then
500k of them in the policy's order were visited since the listing (the
walk of its index passes them: the claim reads the listing whole instead,
store/sql_grab.py), and with the policy's index dropped; with the plan of
the claim read whole (EXPLAIN ANALYZE)."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.visits.policy import Cooldowns, VisitPolicy

from .common import DEFAULT_POSTGRES, log, raw, scratch_store, utcnow
from .visits.visits import COUNT, fill

POLICY = VisitPolicy.FIRST_VISITS_AFTER_LISTING
#: origins of the lister visited since its listing, in the policy's order
TAKEN = (100_000, 500_000)


def grabs(store: Any, lister: str, times: int = 3) -> list[float]:
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        store.grab_next_visits("git", COUNT, POLICY, lister_id=lister)
        seconds.append(round(time.perf_counter() - started, 3))
    return seconds


def whole_plan(store: Any, lister: str) -> list[str]:
    """The claim read whole, run (EXPLAIN ANALYZE): its scans, joins and sorts."""
    with store.engine.connect() as conn:
        query = store._claim_query(
            conn,
            "git",
            COUNT,
            POLICY,
            now=utcnow(),
            lister_id=lister,
            enabled=True,
            cooldowns=Cooldowns(),
            whole=True,
        )
        text = str(query.compile(store.engine, compile_kwargs={"literal_binds": True}))
    words = ("Scan", "Join", "Sort Method", "Execution")
    lines = [r[0].strip() for r in raw(store, f"EXPLAIN (ANALYZE, BUFFERS) {text}")]
    return [line[:160] for line in lines if any(w in line for w in words)]


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    server = os.environ.get("SWH_BENCH_POSTGRES_URL", DEFAULT_POSTGRES)
    with scratch_store(server, "swh_profile_first_visits") as store:
        store.create_task_type(
            TaskType(type="load-git", backend_name="loader.git", default_interval=timedelta(days=1))
        )
        lister = str(store.get_or_create_lister("bench").id)
        log(f"profile: filling {size:,} origins")
        fill(store, lister, 0, size)
        print(json.dumps({"size": size, "taken": 0, "grabs": grabs(store, lister)}))
        for taken in TAKEN:
            raw(
                store,
                """
                UPDATE origin_visit_stats s SET last_scheduled = now(), last_visit = now(),
                       last_visit_status = 'successful', held = NULL, held_since = NULL
                FROM (SELECT url FROM listed_origin WHERE lister_id = %(lister)s AND enabled
                      ORDER BY last_update NULLS LAST, first_seen, url LIMIT %(taken)s) o
                WHERE s.url = o.url AND s.visit_type = 'git'
                """,
                {"lister": lister, "taken": taken},
            )
            raw(store, "VACUUM ANALYZE origin_visit_stats")
            seconds = grabs(store, lister)
            plan = whole_plan(store, lister)
            print(json.dumps({"size": size, "taken": taken, "grabs": seconds, "whole": plan}))
        raw(store, "DROP INDEX ix_listed_origin_first_visits")
        seconds = grabs(store, lister)
        print(json.dumps({"size": size, "taken": TAKEN[-1], "index": False, "grabs": seconds}))


if __name__ == "__main__":
    main()
