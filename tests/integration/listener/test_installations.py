"""One installation, one identity: the id stored in the database, the run
ids in its namespace, the listener's default event queue named after it,
and the events of another installation's runs counted and left alone."""

from __future__ import annotations

import contextlib
import json
import logging
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from kombu import Producer, Queue
from listenertest import broker, make_test_app

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.listener import (
    LEGACY_QUEUE_NAME,
    Action,
    EventHandler,
    Listener,
    ListenerOptions,
    event_queue_name,
)
from swh_like_scheduler.listener import metrics as listener_metrics
from swh_like_scheduler.store import SQLAlchemyStore, migrations

H = timedelta(hours=1)
AT = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


def installation(folder: Path) -> SQLAlchemyStore:
    """A new database with the same task type and tasks as every other one:
    task ids 1 and 2, one-shots at :data:`AT`."""
    store = SQLAlchemyStore.from_url(f"sqlite:///{folder / 'scheduler.sqlite'}")
    migrations.upgrade(store.engine)
    store.create_task_type(TaskType(type="probe", backend_name="probe.run", default_interval=H))
    store.create_tasks(
        [
            Task(
                type="probe",
                args=(n,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=AT,
                deadline=AT,
            )
            for n in range(2)
        ],
        now=AT - H,
    )
    return store


@pytest.fixture
def pair(tmp_path: Path) -> tuple[SQLAlchemyStore, SQLAlchemyStore]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    return installation(tmp_path / "a"), installation(tmp_path / "b")


def test_each_database_has_one_identity_of_its_own(
    pair: tuple[SQLAlchemyStore, SQLAlchemyStore],
) -> None:
    a, b = pair
    assert a.installation_id() != b.installation_id()
    again = SQLAlchemyStore.from_url(a.engine.url)  # another process, another URL spelling
    try:
        assert again.installation_id() == a.installation_id()
    finally:
        again.close()
    assert event_queue_name(a.installation_id()) != event_queue_name(b.installation_id())
    assert event_queue_name(a.installation_id()).startswith(f"{LEGACY_QUEUE_NAME}.")


def test_db_init_writes_the_identity_and_db_identity_shows_or_renews_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.sqlite'}"
    runner = CliRunner()
    init = runner.invoke(swh, ["scheduler", "--db-url", url, "db", "init"])
    assert init.exit_code == 0, init.output
    shown = runner.invoke(swh, ["scheduler", "--db-url", url, "db", "identity", "--json"])
    data = json.loads(shown.output)
    assert f"Installation id: {data['installation_id']}" in init.output
    assert data["event_queue"] == event_queue_name(data["installation_id"])
    renewed = runner.invoke(swh, ["scheduler", "--db-url", url, "db", "identity", "--new"])
    assert renewed.exit_code == 0, renewed.output
    assert "restart every daemon" in renewed.output
    after = json.loads(
        runner.invoke(swh, ["scheduler", "--db-url", url, "db", "identity", "--json"]).output
    )
    assert after["installation_id"] != data["installation_id"]


def test_runs_of_two_installations_never_share_an_id(
    pair: tuple[SQLAlchemyStore, SQLAlchemyStore],
) -> None:
    a, b = pair
    mine = a.claim_ready_tasks("probe", now=AT, limit=10)
    theirs = b.claim_ready_tasks("probe", now=AT, limit=10)
    assert [(c.task_id, c.slot) for c in mine] == [(c.task_id, c.slot) for c in theirs]
    assert not {c.backend_id for c in mine} & {c.backend_id for c in theirs}


def test_events_of_another_installation_are_counted_and_change_nothing(
    pair: tuple[SQLAlchemyStore, SQLAlchemyStore],
) -> None:
    a, b = pair
    [mine, _] = a.claim_ready_tasks("probe", now=AT, limit=10)
    [theirs, _] = b.claim_ready_tasks("probe", now=AT, limit=10)
    before = listener_metrics.dropped_by_reason().get("unknown_run", 0)
    ts = (AT + timedelta(seconds=1)).timestamp()
    events = [
        {"type": "task-started", "uuid": theirs.backend_id, "hostname": "w@b", "timestamp": ts},
        {
            "type": "task-succeeded",
            "uuid": theirs.backend_id,
            "hostname": "w@b",
            "timestamp": ts + 1,
            "result": "{'status': 'eventful'}",
            "runtime": 1.0,
        },
    ]
    summary = EventHandler(a, rng=random.Random(0)).handle_batch(events)
    assert summary[Action.UNKNOWN_RUN] == 2 and summary.total == 2
    listener_metrics.applied(summary)  # what the listener does with every batch
    assert listener_metrics.dropped_by_reason()["unknown_run"] == before + 2
    [run] = a.get_task_runs(mine.task_id)  # the run of the same task id and slot here
    assert run.status is RunStatus.SCHEDULED and run.started is None
    [task] = a.get_tasks([mine.task_id])
    assert task.last_end_at is None and task.status.value == "scheduled"


@pytest.mark.rabbitmq
def test_the_listener_reads_its_installation_queue_and_tells_of_the_old_one(
    pair: tuple[SQLAlchemyStore, SQLAlchemyStore], caplog: pytest.LogCaptureFixture
) -> None:
    a, _ = pair
    app = make_test_app(broker("rabbitmq"))
    mine = event_queue_name(a.installation_id())
    with app.connection_for_write() as conn:
        # the queue an earlier version left, with an event nobody read
        old = Queue(LEGACY_QUEUE_NAME, durable=True, auto_delete=False)
        old(conn.default_channel).declare()
        Producer(conn).publish({}, exchange="", routing_key=LEGACY_QUEUE_NAME)
    caplog.set_level(logging.WARNING, "swh_like_scheduler.listener")
    listener = Listener(
        app,
        a,
        rng=random.Random(0),
        options=ListenerOptions(idle_timeout=0.5, poll_interval=0.1, wakeup_workers=False),
    )
    try:
        listener.run(once=True)
        assert listener.options.queue_name == mine
        with app.connection_for_write() as conn:
            _, messages, _ = conn.default_channel.queue_declare(mine, passive=True)
        assert messages == 0
        [warning] = [r.getMessage() for r in caplog.records if LEGACY_QUEUE_NAME in r.message]
        assert "with 1 event(s) and no one reads it" in warning
        assert f"this listener reads {mine}" in warning
        assert f"--queue-name {LEGACY_QUEUE_NAME}" in warning
    finally:
        with app.connection_for_write() as conn:
            for name in (mine, LEGACY_QUEUE_NAME):
                with contextlib.suppress(Exception):  # (not there)
                    conn.channel().queue_delete(name)
