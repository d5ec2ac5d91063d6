"""Prometheus counters and timings of the runner (scraped from ``--metrics-port``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

CLAIMED = Counter("swh_scheduler_runner_claimed_tasks", "Tasks claimed for dispatch", ["task_type"])
PUBLISHED = Counter(
    "swh_scheduler_runner_published_messages", "Celery messages published", ["task_type"]
)
QUEUE_DEPTH = Gauge(
    "swh_scheduler_runner_queue_depth", "Messages waiting in the type's queue", ["task_type"]
)
PASS_SECONDS = Histogram(
    "swh_scheduler_runner_type_pass_seconds", "Time to serve one type in one pass", ["task_type"]
)
SKIPPED = Counter(
    "swh_scheduler_runner_skipped_firings",
    "Tasks whose missed firings were dropped (catch_up skip): one per stretch",
    ["task_type"],
)
PASS_ERRORS = Counter("swh_scheduler_runner_errors", "Passes cut short by an error", ["stage"])
PASSES = Counter("swh_scheduler_runner_passes", "Runner passes")
TOP_UPS = Counter(
    "swh_scheduler_runner_top_ups",
    "Passes begun early because a queue the last pass filled drained to its low-water mark",
)
LONG_RUNS_KEPT_WAITING = Counter(
    "swh_scheduler_runner_long_runs_kept_waiting",
    "Passes of a type that left long tasks waiting to keep worker slots for shorter ones",
    ["task_type"],
)
WORKER_SLOTS = Gauge(
    "swh_scheduler_runner_worker_slots",
    "Worker slots of the type's queue, as its live workers said (when known)",
    ["task_type"],
)
REPUBLISHED = Counter(
    "swh_scheduler_runner_republished_messages", "Messages of never-started runs sent again"
)


def record_type_pass(
    task_type: str, depth: int, claimed: int, published: int, seconds: float
) -> None:
    CLAIMED.labels(task_type=task_type).inc(claimed)
    PUBLISHED.labels(task_type=task_type).inc(published)
    QUEUE_DEPTH.labels(task_type=task_type).set(depth)
    PASS_SECONDS.labels(task_type=task_type).observe(seconds)
