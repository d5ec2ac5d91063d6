"""The reference's own first-visits runner (swh-scheduler 3.6.0's
``schedule_first_visits``, what ``swh scheduler start-runner-first-visits``
runs) through its client against ``rpc-serve``'s ``/swh/`` (SQLite,
PostgreSQL), its Celery app on our Redis: it sends a new listing's origins
to ``<prefix>:<backend name>`` (counted on the broker), marks the lister
with ``update_lister``, and ours then finds nothing left to do; the other
way round, a lister our step marked is no longer the reference's to
schedule. The environment with the reference's client comes from
``test_swh_rpc.py``."""

from __future__ import annotations

import base64
import dataclasses
import json
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
import services
from test_swh_rpc import RW, reference_python, server  # noqa: F401 (fixtures)

from swh_like_scheduler.broker.port import CeleryBroker
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.recurrent.first_visits import schedule_first_visits
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import ListedOrigin
from swh_like_scheduler.visits.policy import VisitSettings

pytestmark = pytest.mark.redis

SCRIPT = """
import json, sys
from swh.scheduler import get_scheduler
from swh.scheduler.celery_backend.first_visits import schedule_first_visits
headers = {"Authorization": "Bearer " + sys.argv[2]}
scheduler = get_scheduler("remote", url=sys.argv[1], session_kwargs={"headers": headers})
sent = [schedule_first_visits(scheduler) for _ in range(int(sys.argv[3]))]
waiting = [x.name for x in scheduler.get_listers(with_first_visits_to_schedule=True)]
print(json.dumps({"sent": sent, "waiting": waiting}))
"""


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"fvref-{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(services.redis_url())
    client.delete(*(f"{name}:loader.{kind}" for kind in ("git", "hg")))
    client.close()


def _listing(db_url: str, prefix: str) -> tuple[str, set[str]]:
    store = SQLAlchemyStore.from_url(db_url)
    try:
        for kind in ("git", "hg"):
            store.create_task_type(TaskType(type=f"load-{kind}", backend_name=f"loader.{kind}"))
        at = datetime.now(UTC) - timedelta(hours=1)
        lister = store.get_or_create_lister("newforge", "", prefix, now=at)
        assert lister.id is not None
        urls = [
            (f"https://new.example/{kind}{n}", kind) for kind in ("git", "hg") for n in range(6)
        ]
        store.record_listed_origins([ListedOrigin(lister.id, u, k) for u, k in urls], now=at)
        store.update_lister(dataclasses.replace(lister, last_listing_finished_at=at), now=at)
        return lister.id, {u for u, _ in urls}
    finally:
        store.close()


def _reference_runs(python: str, url: str, runs: int, tmp_path: Path) -> dict[str, list[object]]:
    config = tmp_path / "reference.yml"
    config.write_text(f"celery:\n  task_broker: {services.redis_url()}\n")
    script = tmp_path / "first_visits.py"
    script.write_text(textwrap.dedent(SCRIPT))
    done = subprocess.run(
        [python, str(script), url, RW, str(runs)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"SWH_CONFIG_FILENAME": str(config), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, list[object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _drained(queue: str) -> list[str]:
    client = redis.Redis.from_url(services.redis_url())
    urls = []
    while (raw := client.rpop(queue)) is not None:
        _, kwargs, _ = json.loads(base64.b64decode(json.loads(raw)["body"]))
        urls.append(kwargs["url"])
    client.close()
    return urls


def test_the_references_runner_sends_and_marks_through_swh(
    db_url: str,
    server: str,  # noqa: F811
    reference_python: str,  # noqa: F811
    prefix: str,
    tmp_path: Path,
) -> None:
    lister_id, urls = _listing(db_url, prefix)
    found = _reference_runs(reference_python, server, 2, tmp_path)
    assert found == {"sent": [12, 0], "waiting": []}  # marked by the first run
    app = make_app(config_module=None, broker_url=services.redis_url(), load_workers=False)
    broker = CeleryBroker(app)
    queues = [f"{prefix}:loader.git", f"{prefix}:loader.hg"]
    assert broker.depths(queues) == dict.fromkeys(queues, 6)
    sent = [u for q in queues for u in _drained(q)]
    assert sorted(sent) == sorted(urls)
    store = SQLAlchemyStore.from_url(db_url)
    try:
        (lister,) = store.get_listers_by_id([lister_id])
        assert lister.first_visits_scheduled_at is not None
        assert schedule_first_visits(store, broker, VisitSettings(), datetime.now(UTC)) == []
    finally:
        store.close()


def test_a_lister_our_step_marked_is_not_the_references_to_schedule(
    db_url: str,
    server: str,  # noqa: F811
    reference_python: str,  # noqa: F811
    prefix: str,
    tmp_path: Path,
) -> None:
    _, urls = _listing(db_url, prefix)
    app = make_app(config_module=None, broker_url=services.redis_url(), load_workers=False)
    store = SQLAlchemyStore.from_url(db_url)
    try:
        (done,) = schedule_first_visits(
            store, CeleryBroker(app), VisitSettings(), datetime.now(UTC)
        )
    finally:
        store.close()
    assert done.marked and done.total == 12
    assert _reference_runs(reference_python, server, 1, tmp_path) == {"sent": [0], "waiting": []}
    sent = [u for kind in ("git", "hg") for u in _drained(f"{prefix}:loader.{kind}")]
    assert sorted(sent) == sorted(urls)
