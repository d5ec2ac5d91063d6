"""A Celery app with leased test tasks, for in-process and subprocess workers.

Configured from the environment when imported by ``celery -A leaseapp``:
``LEASE_TEST_BROKER``, ``SWH_SCHEDULER_DB_URL``, ``LEASE_TEST_REDIS`` (where
the tasks count what they did), ``LEASE_TEST_PING`` (seconds).

Tasks: ``tests.lease.leased`` (a :class:`LeasedTask` that counts its
executions, refusals and steps), ``tests.lease.plain`` (the same work behind
the start guard alone, :class:`SchedulerTask`) and ``tests.lease.long_result``
(a :class:`ResultEventTask` whose return value is longer than the repr Celery
puts in ``task-succeeded``, with its status at the end).
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import Any

import redis
from celery import Celery

from swh_like_scheduler.broker import publish_batch
from swh_like_scheduler.dispatch.serve import message_for
from swh_like_scheduler.domain.lease import LeaseGrant
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.worker import ResultEventTask, SchedulerTask
from swh_like_scheduler.worker.lease import LeasedTask

TASK_NAME = "tests.lease.leased"
PLAIN_TASK = "tests.lease.plain"
LONG_RESULT_TASK = "tests.lease.long_result"
#: longer than Celery's resultrepr_maxsize (1024): the status item is cut off
LONG_PAD = 3000


def executions_key(backend_id: str) -> str:
    return f"swh-test-lease:executions:{backend_id}"


def refusals_key(backend_id: str) -> str:
    return f"swh-test-lease:refusals:{backend_id}"


def steps_key(backend_id: str) -> str:
    return f"swh-test-lease:steps:{backend_id}"


def attempts_key(token: str) -> str:
    return f"swh-test-lease:attempts:{token}"


def release_key(backend_id: str) -> str:
    """Set by a test: the run's work ends at its next step, its duration
    not over (a busy run kept only until the test has seen what it waits for)."""
    return f"swh-test-lease:release:{backend_id}"


def long_result(status: str) -> dict[str, Any]:
    return {"pad": "x" * LONG_PAD, "status": status}


def send_again(store: SQLAlchemyStore, app: Celery, now: datetime) -> int:
    """Publish a second copy of every run published before ``now`` that has
    not started, with the same task id, as a broker redelivery (or a
    re-publish that cannot see the queue) does; returns how many."""
    types = {t.type: t for t in store.get_task_types()}
    taken = store.reclaim_unstarted_runs(now=now, published_before=now)
    messages = [message_for(claimed, types[name]) for name, claimed in taken]
    return publish_batch(app, messages)


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
        def on_start_refused(self, grant: LeaseGrant) -> None:
            counter.rpush(refusals_key(self.request.id), str(grant.reason))
            super().on_start_refused(grant)

    class CountingTask(SchedulerTask):
        def on_start_refused(self, grant: LeaseGrant) -> None:
            counter.rpush(refusals_key(self.request.id), str(grant.reason))
            super().on_start_refused(grant)

    @app.task(name=TASK_NAME, base=CountingLeasedTask, bind=True, shared=False)
    def leased(
        self: LeasedTask,
        *args: Any,
        duration: float = 1.0,
        step: float = 0.05,
        token: str | None = None,
        then: float | None = None,
    ) -> dict[str, Any]:
        """Count the execution, then work ``duration`` seconds in small steps,
        counting them; never looks at ``should_stop`` (the hard stop must act).
        With ``token`` and ``then``, runs after the first of that token work
        ``then`` seconds instead."""
        return work(self, duration, step, token, then)

    @app.task(name=PLAIN_TASK, base=CountingTask, bind=True, shared=False)
    def plain(
        self: SchedulerTask,
        *args: Any,
        duration: float = 1.0,
        step: float = 0.05,
        token: str | None = None,
        then: float | None = None,
    ) -> dict[str, Any]:
        """:func:`leased`'s work behind the start guard alone."""
        return work(self, duration, step, token, then)

    def work(
        self: SchedulerTask, duration: float, step: float, token: str | None, then: float | None
    ) -> dict[str, Any]:
        backend_id = self.request.id
        counter.incr(executions_key(backend_id))
        if token is not None and then is not None and counter.incr(attempts_key(token)) > 1:
            duration = then
        end = time.monotonic() + duration
        while time.monotonic() < end and not counter.exists(release_key(backend_id)):
            time.sleep(step)
            counter.incr(steps_key(backend_id))
        return {"status": "eventful"}

    @app.task(name=LONG_RESULT_TASK, base=ResultEventTask, bind=True, shared=False)
    def long_result_task(self: ResultEventTask, status: str = "uneventful") -> dict[str, Any]:
        return long_result(status)

    return app


if "LEASE_TEST_BROKER" in os.environ:
    app = build(
        os.environ["LEASE_TEST_BROKER"],
        os.environ["SWH_SCHEDULER_DB_URL"],
        os.environ["LEASE_TEST_REDIS"],
        float(os.environ.get("LEASE_TEST_PING", "1")),
    )
