"""First visits of a listing (issue 59: the reference's
``start-runner-first-visits``) on SQLite and PostgreSQL with a real broker
(Redis, RabbitMQ), counted on the broker: the lister's origins land in
``<prefix>:<backend name>`` up to each queue's limit, the lister is marked
only once all of them were scheduled after its last listing, a lister
without a prefix, without a finished listing or marked already is skipped,
a broker that refuses marks nothing, and no origin is sent twice across
steps; then the command line (``origin schedule-first-visits`` and the step
of ``schedule-recurrent``)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import amqp.exceptions
import pytest
from celery import Celery
from click.testing import CliRunner

from swh_like_scheduler.broker.port import CeleryBroker
from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.recurrent.first_visits import schedule_first_visits
from swh_like_scheduler.recurrent.scheduler import STEP_LIMIT
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import ListedOrigin, Lister
from swh_like_scheduler.visits.policy import VisitSettings

H = timedelta(hours=1)
SETTINGS = VisitSettings()


@pytest.fixture
def app(broker_url: str) -> Celery:
    return make_app(config_module=None, broker_url=broker_url, load_workers=False)


@pytest.fixture
def prefix(app: Celery) -> Iterator[str]:
    """A prefix of this test's own; its queues deleted afterwards."""
    name = f"fv-{uuid.uuid4().hex[:10]}"
    yield name
    queues = [f"{p}:loader.{kind}" for p in (name, f"{name}-other") for kind in ("git", "hg")]
    queues += [f"{name}-regular-{kind}" for kind in ("git", "hg")]
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in queues:
            if conn.transport.driver_type == "redis":
                channel.client.delete(queue, f"_kombu.binding.{queue}")
                continue
            with contextlib.suppress(Exception):
                channel.queue_delete(queue)


def drain(app: Celery, queue: str) -> list[dict[str, Any]]:
    """The visits waiting in ``queue``, taken off it: each one's kwargs and task name."""
    found = []
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        while True:
            try:
                message = channel.basic_get(queue, no_ack=True)
            except amqp.exceptions.NotFound:  # RabbitMQ: nothing was ever sent
                return found
            if message is None:
                return found
            _, kwargs, _ = json.loads(message.body)
            found.append({**kwargs, "task": message.headers["task"]})


def depth(app: Celery, queue: str) -> int:
    return CeleryBroker(app).depths([queue])[queue]


def types(store: SQLAlchemyStore, prefix: str, git_limit: int | None) -> None:
    for kind, limit in (("git", git_limit), ("hg", None)):
        store.create_task_type(
            TaskType(
                type=f"load-{kind}",
                backend_name=f"loader.{kind}",
                queue=f"{prefix}-regular-{kind}",
                max_queue_length=limit,
            )
        )


def lister(
    store: SQLAlchemyStore,
    name: str,
    queue_prefix: str | None,
    counts: dict[str, int],
    finished: datetime | None,
    **fields: Any,
) -> tuple[Lister, set[str]]:
    """A lister whose listing of ``counts`` origins per visit type finished at ``finished``."""
    made = store.get_or_create_lister(name, "", queue_prefix, now=datetime.now(UTC) - 2 * H)
    assert made.id is not None
    urls = {
        kind: [f"https://{name}.example/{kind}{n}" for n in range(c)] for kind, c in counts.items()
    }
    store.record_listed_origins(
        [ListedOrigin(made.id, u, kind) for kind, some in urls.items() for u in some]
    )
    if finished is not None or fields:
        changed = dataclasses.replace(made, last_listing_finished_at=finished, **fields)
        made = store.update_lister(changed)
    return made, {u for some in urls.values() for u in some}


def test_first_visits_land_in_the_prefixed_queues_and_the_lister_is_marked_once_all_were_sent(
    store: SQLAlchemyStore, app: Celery, prefix: str
) -> None:
    now = datetime.now(UTC)
    types(store, prefix, git_limit=20)
    new, urls = lister(store, "newforge", prefix, {"git": 30, "hg": 10}, now - H)
    other = f"{prefix}-other"
    lister(store, "noprefix", None, {"git": 5}, now - H)
    lister(store, "unfinished", other, {"git": 5}, None)
    lister(store, "marked", other, {"git": 5}, now - H, first_visits_scheduled_at=now - H)
    broker = CeleryBroker(app)
    git, hg = f"{prefix}:loader.git", f"{prefix}:loader.hg"

    first = schedule_first_visits(store, broker, SETTINGS, now)
    assert [(p.lister, p.sent, p.marked, p.skipped) for p in first] == [
        ("newforge", {git: 20, hg: 10}, False, None)  # the git queue's limit: 10 wait
    ]
    assert (depth(app, git), depth(app, hg)) == (20, 10)
    assert depth(app, f"{other}:loader.git") == 0
    assert depth(app, f"{prefix}-regular-git") == 0  # not the type's own queue
    second = schedule_first_visits(store, broker, SETTINGS, now + timedelta(seconds=1))
    assert [(p.sent, p.marked) for p in second] == [({git: 0, hg: 0}, False)]  # queue full
    sent = drain(app, git) + drain(app, hg)
    assert len(sent) == 30 and {v["task"] for v in sent} == {"loader.git", "loader.hg"}

    third = schedule_first_visits(store, broker, SETTINGS, now + timedelta(seconds=2))
    assert [(p.sent, p.marked) for p in third] == [({git: 10, hg: 0}, True)]
    sent += drain(app, git)
    assert len(sent) == 40 and {v["url"] for v in sent} == urls  # each once
    (marked,) = store.get_listers_by_id([str(new.id)])
    assert marked.first_visits_scheduled_at == now + timedelta(seconds=2)
    assert store.get_listers(with_first_visits_to_schedule=True) == []

    assert schedule_first_visits(store, broker, SETTINGS, now + H) == []  # no longer considered
    assert (depth(app, git), depth(app, hg)) == (0, 0)


def test_a_lister_whose_origins_were_all_scheduled_is_marked_without_a_message(
    store: SQLAlchemyStore, app: Celery, prefix: str
) -> None:
    now = datetime.now(UTC)
    types(store, prefix, git_limit=None)
    _, urls = lister(store, "early", prefix, {"git": 6}, now - H)
    taken = store.grab_next_visits("git", 10, "oldest_scheduled_first", now=now)
    assert {o.url for o in taken} == urls  # the recurrent mix took them after the listing
    done = schedule_first_visits(store, CeleryBroker(app), SETTINGS, now + timedelta(seconds=1))
    assert [(p.sent, p.marked) for p in done] == [({f"{prefix}:loader.git": 0}, True)]
    assert drain(app, f"{prefix}:loader.git") == []


@pytest.mark.postgresql
def test_a_room_larger_than_a_step_is_filled_by_the_steps_that_follow(
    pg_store: SQLAlchemyStore, app: Celery, prefix: str
) -> None:
    now = datetime.now(UTC)
    types(pg_store, prefix, git_limit=50_000)
    _, urls = lister(pg_store, "large", prefix, {"git": STEP_LIMIT + 5}, now - H)
    broker = CeleryBroker(app)
    # a fresh listing on a database never analysed: the claim gathers the
    # planner's statistics itself (without them this grab of 10,005 origins
    # ran past the 30 s statement timeout)
    (first,) = schedule_first_visits(pg_store, broker, SETTINGS, now)
    assert (first.total, first.full, first.marked) == (STEP_LIMIT, True, False)
    (second,) = schedule_first_visits(pg_store, broker, SETTINGS, now + timedelta(seconds=1))
    assert (second.total, second.full, second.marked) == (5, False, True)
    sent = drain(app, f"{prefix}:loader.git")
    assert len(sent) == len(urls) and {v["url"] for v in sent} == urls


@pytest.mark.rabbitmq
def test_a_broker_that_refuses_marks_nothing(store: SQLAlchemyStore, prefix: str) -> None:
    """The queue exists on RabbitMQ with other arguments than Celery
    declares it with: its depth can be read, the publish is refused."""
    import services

    app = make_app(config_module=None, broker_url=services.amqp_url(), load_workers=False)
    now = datetime.now(UTC)
    types(store, prefix, git_limit=None)
    made, urls = lister(store, "refused", prefix, {"git": 5}, now - H)
    queue = f"{prefix}:loader.git"
    with app.connection_for_write() as conn:
        conn.default_channel.queue_declare(queue, durable=False, auto_delete=False)
    try:
        (done,) = schedule_first_visits(store, CeleryBroker(app), SETTINGS, now)
        assert done.failed and "PRECONDITION" in str(done.skipped).upper()
        assert not done.marked
        stats = store.origin_visit_stats_get([(u, "git") for u in urls])
        assert [s.last_scheduled for s in stats] == []  # no origin marked scheduled
        assert [x.id for x in store.get_listers(with_first_visits_to_schedule=True)] == [made.id]
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)


@pytest.mark.parametrize("command", ["schedule-first-visits", "schedule-recurrent"])
def test_the_command_line_sends_and_marks(
    db_url: str, broker_url: str, app: Celery, prefix: str, command: str
) -> None:
    """``origin schedule-first-visits --once`` and a ``schedule-recurrent
    --once`` step: the first visits in the prefixed queue before the
    recurrent mix sends anything to the type's own queue."""
    store = SQLAlchemyStore.from_url(db_url)
    try:
        types(store, prefix, git_limit=None)
        _, urls = lister(store, "clinew", prefix, {"git": 7}, datetime.now(UTC) - H)
    finally:
        store.close()
    words = ["origin", "schedule-first-visits"] if command != "schedule-recurrent" else [command]
    args = ["scheduler", "--db-url", db_url, *words, "--once", "--broker-url", broker_url]
    result = CliRunner().invoke(swh, args)
    assert result.exit_code == 0, result.output
    assert f"first visits of clinew: sent {prefix}:loader.git 7; all scheduled" in result.output
    sent = drain(app, f"{prefix}:loader.git")
    assert {v["url"] for v in sent} == urls and len(sent) == 7
    assert drain(app, f"{prefix}-regular-git") == []  # in their cooldown: not sent again
    if command == "schedule-first-visits":
        again = CliRunner().invoke(swh, [*args, "--json"])
        assert again.exit_code == 0 and json.loads(again.output) == []
