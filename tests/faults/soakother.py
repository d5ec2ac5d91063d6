"""A second installation on the soak's broker: its own database, the same
Redis or RabbitMQ vhost.

A small platform (a runner doing the monitor's duties, a listener on its
default event queue, one worker) with its own probe tasks, on another
database of the soak's PostgreSQL server, sharing the broker (and, on
Redis, the result backend) with the first. The first installation's
listeners use their default event queue too, so that nothing but the
product keeps the two apart. Its runs must never disturb the first's, nor
the first's its own: it is checked as the first is (:mod:`soakcheck`), from
its own probe notes (its own key prefix).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import soakapp
from soakplan import TIMEOUTS, OneShot, Recurring

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.store import SQLAlchemyStore, make_engine, migrations

DATABASE = "soak_other"
WORK_TYPE = "soak-other-work"
QUEUE = "soak-other-work"
#: its processes (names the first installation's faults never draw)
RUNNER, LISTENER, WORKER = "x-runner", "x-listener", "x-work"
PROCESSES = (RUNNER, LISTENER, WORKER)


def database_url(server_url: str) -> str:
    """Create the second database on the server of ``server_url`` (a
    ``.../postgres`` URL), migrated; its URL."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    url = server_url.rsplit("/", 1)[0] + f"/{DATABASE}"
    engine = make_engine(url)
    try:
        migrations.upgrade(engine)
    finally:
        engine.dispose()
    return url


class OtherInstallation:
    """Its store, its workload, and its processes' commands."""

    def __init__(self, db_url: str, prefix: str) -> None:
        self.db_url = db_url
        self.prefix = prefix
        self.store = SQLAlchemyStore.from_url(db_url)
        self.tids: dict[int, str] = {}

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "SWH_SCHEDULER_DB_URL": self.db_url, "SOAK_PREFIX": self.prefix}

    def create(
        self,
        recurring: tuple[Recurring, ...],
        oneshots: tuple[OneShot, ...],
        at: Any,
    ) -> None:
        """Its task type and tasks; ``at(offset)``: an instant of the soak."""
        self.store.create_task_type(
            TaskType(
                type=WORK_TYPE,
                backend_name=soakapp.WORK_TASK,
                queue=QUEUE,
                default_interval=timedelta(seconds=20),
                min_interval=timedelta(seconds=10),
                max_interval=timedelta(seconds=60),
                max_queue_length=200,
                num_retries=2,
                retry_delay=timedelta(seconds=2),
                retry_growth=1.5,
                retry_cap=timedelta(seconds=10),
                retry_jitter=timedelta(0),
                max_allowed_duration=timedelta(seconds=60),
            )
        )
        work = self.store.get_task_type(WORK_TYPE)
        assert work is not None
        now = datetime.now(UTC)
        values: list[dict[str, Any]] = [
            {
                "kwargs": {"tid": r.tid, "duration": r.duration, "fail_rate": r.fail_rate},
                **r.schedule,
            }
            for r in recurring
        ]
        values += [
            {
                "kwargs": {"tid": o.tid, "duration": o.duration},
                "kind": "oneshot",
                "next_run": at(o.at).isoformat(),
            }
            for o in oneshots
        ]
        made = self.store.create_tasks([task_from_input(v, work, now=now) for v in values], now=now)
        self.tids = {t.id or 0: t.kwargs["tid"] for t in made}

    def command(self, name: str, swh: list[str], celery: list[str]) -> list[str]:
        t = TIMEOUTS
        if name == RUNNER:
            return [
                *swh,
                "start-runner",
                *("--period", "1", "--monitor-period", "1", "--lock-ttl", "5"),
                *("--orphaned-after", "3", "--republish-after", "15 s"),
                *("--ping-timeout", str(t.ping_timeout), "--grace", str(t.grace)),
                *("--worker-timeout", str(t.worker_timeout)),
                *("--offline-grace", str(t.offline_grace)),
            ]
        if name == LISTENER:  # its default event queue, as the first's listeners
            return [*swh, "start-listener", "--catch-up-every", "10", "--catch-up-delay", "10"]
        return [
            *celery,
            "worker",
            *("-P", "prefork", "-c", "2", "-Q", QUEUE, "-n", f"{WORKER}@%h", "-E"),
            *("--without-gossip", "--without-mingle", "--loglevel", "WARNING"),
        ]

    def close(self) -> None:
        self.store.close()
