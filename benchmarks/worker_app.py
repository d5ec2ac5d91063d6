"""The Celery app of the benchmark worker: one no-op task, ``bench.noop``.

    SWH_BENCH_BROKER_URL=redis://127.0.0.1:6379/9 \
        celery -A benchmarks.worker_app worker -Q QUEUE -E

Benchmark-only (the product's own apps never import it).
"""

from __future__ import annotations

import os
from typing import Any

from swh_like_scheduler.celery_factory import make_app

app = make_app(
    config_module=None,
    broker_url=os.environ.get("SWH_BENCH_BROKER_URL", "redis://127.0.0.1:6379/9"),
    load_workers=False,
    task_ignore_result=True,
    worker_send_task_events=True,
    task_send_sent_event=False,
    worker_hijack_root_logger=False,
)


@app.task(name="bench.noop")
def noop(*args: Any, **kwargs: Any) -> dict[str, str]:
    """Does nothing; reported as an eventful run."""
    return {"status": "eventful"}
