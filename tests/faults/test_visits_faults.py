"""``schedule-recurrent`` as a daemon (a real ``swh`` process) while its
broker, a private Redis, restarts: it keeps the queue filled before and
after, says so once in its log, and stops at once on SIGTERM. Visits are
counted from the messages in the broker."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis
from private import PrivateRedis
from waiting import wait_until

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import ListedOrigin

pytestmark = [pytest.mark.faults, pytest.mark.postgresql, pytest.mark.redis]


def taken(client: redis.Redis, queue: str) -> list[str]:
    """The urls of the visits waiting in ``queue``, taken off it."""
    urls = []
    while (raw := client.rpop(queue)) is not None:
        message = json.loads(raw)
        _, kwargs, _ = json.loads(base64.b64decode(message["body"]))
        urls.append(kwargs["url"])
    return urls


@pytest.mark.timeout(120)
def test_the_daemon_keeps_the_queue_filled_across_a_broker_restart(
    pg_store: SQLAlchemyStore, postgres_url: str, private_redis: PrivateRedis, tmp_path: Path
) -> None:
    queue = f"swh-visits-{uuid.uuid4().hex[:8]}"
    pg_store.create_task_type(
        TaskType(type="load-git", backend_name="loader.git", queue=queue, max_queue_length=20)
    )
    lister = str(pg_store.get_or_create_lister("gitlab").id)
    urls = [f"https://forge.example/p{n:03d}" for n in range(100)]
    pg_store.record_listed_origins([ListedOrigin(lister, u, "git") for u in urls])
    log = tmp_path / "recurrent.log"
    command = [
        str(Path(sys.executable).parent / "swh"),
        "scheduler",
        "--db-url",
        postgres_url,
        "schedule-recurrent",
        "--period",
        "0.3",
        "--broker-url",
        private_redis.url,
    ]
    with log.open("wb") as out:
        daemon = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    client = redis.Redis.from_url(private_redis.url)
    seen: list[str] = []
    try:
        wait_until(lambda: client.llen(queue) == 20, 30, "the queue filled to its limit")
        seen += taken(client, queue)
        wait_until(lambda: client.llen(queue) == 20, 30, "the queue filled again")
        private_redis.stop()  # the 20 waiting are lost with it (no persistence)
        wait_until(lambda: b"failed" in log.read_bytes(), 30, "the outage in the log")
        private_redis.start()
        client = redis.Redis.from_url(private_redis.url)
        wait_until(lambda: client.llen(queue) == 20, 30, "the queue filled after the restart")
        seen += taken(client, queue)
        assert daemon.poll() is None
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=15) == 0
    finally:
        if daemon.poll() is None:
            os.kill(daemon.pid, signal.SIGKILL)
            daemon.wait()
    text = log.read_text()
    assert text.count("schedule-recurrent step failed") == 1, text
    assert "works again" in text, text
    assert len(seen) == len(set(seen)) == 40  # 20 before, 20 after: none sent twice
    assert set(seen) <= set(urls)
