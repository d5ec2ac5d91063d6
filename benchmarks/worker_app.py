"""The Celery app of the benchmark worker: one no-op body as two tasks,
``bench.noop`` (a bare Celery task) and ``bench.guarded`` (the same body on
the product's base class: the start guard asks the scheduler database,
``SWH_SCHEDULER_DB_URL``, before each run of ours).

    SWH_BENCH_BROKER_URL=redis://127.0.0.1:6379/9 SWH_SCHEDULER_DB_URL=... \
        celery -A benchmarks.worker_app worker -Q QUEUE -E

Benchmark-only (the product's own apps never import it).
"""

from __future__ import annotations

import os
from typing import Any

from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.worker import SchedulerTask

app = make_app(
    config_module=None,
    broker_url=os.environ.get("SWH_BENCH_BROKER_URL", "redis://127.0.0.1:6379/9"),
    load_workers=False,
    task_ignore_result=True,
    worker_send_task_events=True,
    task_send_sent_event=False,
    worker_hijack_root_logger=False,
)


def body() -> dict[str, str]:
    """Does nothing; reported as an eventful run."""
    return {"status": "eventful"}


@app.task(name="bench.noop", shared=False)
def noop(*args: Any, **kwargs: Any) -> dict[str, str]:
    return body()


@app.task(name="bench.guarded", base=SchedulerTask, shared=False)
def guarded(*args: Any, **kwargs: Any) -> dict[str, str]:
    return body()
