"""Where a grab's time goes at one world size: ``python -m
benchmarks.profile_visits [SIZE] [POLICY]`` fills the benchmark's world
(:func:`benchmarks.visits.visits.fill`), then prints, as JSON lines, the
claim's plan with its buffers (EXPLAIN ANALYZE, BUFFERS) and the seconds of
each statement of three grabs of 1,000 (release, claim, listings, mark)."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.visits.policy import VisitPolicy

from .common import DEFAULT_POSTGRES, log, scratch_store
from .visits.visits import COUNT, claim_plan, fill, of_lister, statement_seconds


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    policy = VisitPolicy(sys.argv[2] if len(sys.argv) > 2 else "already_visited_order_by_lag")
    server = os.environ.get("SWH_BENCH_POSTGRES_URL", DEFAULT_POSTGRES)
    with scratch_store(server, "swh_profile_visits") as store:
        store.create_task_type(
            TaskType(type="load-git", backend_name="loader.git", default_interval=timedelta(days=1))
        )
        lister = str(store.get_or_create_lister("bench").id)
        log(f"profile: filling {size:,} origins")
        fill(store, lister, 0, size)
        plan = claim_plan(store, policy, of_lister(policy, lister))
        print(json.dumps({"size": size, "policy": policy.value, "plan": plan}))
        spent = statement_seconds(store.engine)
        started = time.perf_counter()
        for _ in range(3):
            store.grab_next_visits("git", COUNT, policy, lister_id=of_lister(policy, lister))
        total = time.perf_counter() - started
        top = sorted(spent.items(), key=lambda kv: -kv[1])[:8]
        print(
            json.dumps(
                {
                    "size": size,
                    "policy": policy.value,
                    "grabs": 3,
                    "seconds": round(total, 3),
                    "statements": {k: round(v, 3) for k, v in top},
                }
            )
        )


if __name__ == "__main__":
    main()
