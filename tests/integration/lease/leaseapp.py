"""A Celery app with leased test tasks, for in-process and subprocess workers.

Configured from the environment when imported by ``celery -A leaseapp``:
``LEASE_TEST_BROKER``, ``SWH_SCHEDULER_DB_URL``, ``LEASE_TEST_REDIS`` (where
the tasks count what they did), ``LEASE_TEST_PING`` (seconds).
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery

from swh_like_scheduler.celery_factory import make_app
from swh_like_scheduler.lease.protocol import LeaseGrant
from swh_like_scheduler.lease.task import LeasedTask

TASK_NAME = "tests.lease.leased"


def executions_key(backend_id: str) -> str:
    return f"swh-test-lease:executions:{backend_id}"


def refusals_key(backend_id: str) -> str:
    return f"swh-test-lease:refusals:{backend_id}"


def steps_key(backend_id: str) -> str:
    return f"swh-test-lease:steps:{backend_id}"


def build(broker_url: str, db_url: str, redis_url: str, ping: float) -> Celery:
    app = make_app(
        config_module=None,
        broker_url=broker_url,
        load_workers=False,
        broker_connection_timeout=3,
        broker_heartbeat=2,
        worker_hijack_root_logger=False,
        worker_prefetch_multiplier=1,
        task_acks_late=False,
        swh_scheduler_db_url=db_url,
        swh_scheduler_lease_ping=ping,
    )
    counter = redis.Redis.from_url(redis_url)

    class CountingLeasedTask(LeasedTask):
        def on_lease_refused(self, grant: LeaseGrant) -> None:
            counter.rpush(refusals_key(self.request.id), str(grant.reason))
            super().on_lease_refused(grant)

    @app.task(name=TASK_NAME, base=CountingLeasedTask, bind=True)
    def leased(
        self: LeasedTask, *args: Any, duration: float = 1.0, step: float = 0.05
    ) -> dict[str, Any]:
        """Count the execution, then work ``duration`` seconds in small steps,
        counting them; never looks at ``should_stop`` (the hard stop must act)."""
        backend_id = self.request.id
        counter.incr(executions_key(backend_id))
        end = time.monotonic() + duration
        while time.monotonic() < end:
            time.sleep(step)
            counter.incr(steps_key(backend_id))
        return {"status": "eventful"}

    return app


if "LEASE_TEST_BROKER" in os.environ:
    app = build(
        os.environ["LEASE_TEST_BROKER"],
        os.environ["SWH_SCHEDULER_DB_URL"],
        os.environ["LEASE_TEST_REDIS"],
        float(os.environ.get("LEASE_TEST_PING", "1")),
    )
