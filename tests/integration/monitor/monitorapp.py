"""The Celery app of the monitor's worker subprocesses (``celery -A monitorapp``):
the shared sleep task on the broker named by ``MONITOR_TEST_BROKER``, events on,
each running body renewing its run every half second."""

from __future__ import annotations

import os

import swh_like_workers.sleep  # noqa: F401 - registers the shared sleep task
from swh_like_scheduler.plumbing.celery_factory import make_app

app = make_app(
    config_module=None,
    broker_url=os.environ["MONITOR_TEST_BROKER"],
    load_workers=False,
    broker_connection_timeout=3,
    broker_heartbeat=2,
    worker_hijack_root_logger=False,
    worker_send_task_events=True,
    worker_prefetch_multiplier=1,
    swh_scheduler_lease_ping=0.5,
)
