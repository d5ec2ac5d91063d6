"""A Celery app of one leased task type for the platform behind PgBouncer
(``celery -A pooledapp worker``): its start guard, its pings and its final
write reach the database through the pooler.

Configured from the environment: ``POOLED_BROKER``, ``SWH_SCHEDULER_DB_URL``
(the pooler's URL) and ``POOLED_OUT``, a folder where each execution of the
body leaves one file, ``RUN~EXECUTION`` (its run's Celery task id, then a
random name), holding the task's number: what really ran, whatever the
store says.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.worker.lease import LeasedTask

TASK = "tests.pooled.work"

app = make_app(
    config_module=None,
    broker_url=os.environ.get("POOLED_BROKER", "redis://127.0.0.1:6379/0"),
    load_workers=False,
    broker_connection_timeout=3,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
    swh_scheduler_db_url=os.environ.get("SWH_SCHEDULER_DB_URL"),
    swh_scheduler_lease_ping=0.5,
)


@app.task(name=TASK, base=LeasedTask, bind=True, shared=False)
def work(self: LeasedTask, number: int, duration: float = 0.2) -> dict[str, Any]:
    """Work ``duration`` seconds (pinging meanwhile), then leave the marker."""
    time.sleep(duration)
    out = Path(os.environ["POOLED_OUT"])
    written = out / f".{uuid.uuid4().hex}"
    written.write_text(f"{number}\n")
    # one file per execution, whole when it appears: RUN-ID~EXECUTION
    written.rename(out / f"{self.request.id}~{uuid.uuid4().hex}")
    return {"status": "eventful"}
