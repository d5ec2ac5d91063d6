"""Runner -> real Celery worker -> listener, on PostgreSQL with Redis and RabbitMQ."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from celery.contrib.testing.worker import start_worker
from listenertest import (
    H,
    Recorder,
    all_runs,
    expected_status,
    listener_thread,
    make_test_app,
    new_sleep_type,
    open_run_count,
    options,
    sleep_tasks,
    snapshot,
    unique_queue_name,
    wait_until,
)
from waiting import delete_queues

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import RunStatus, TaskStatus
from swh_like_scheduler.listener import Action, Listener, handle_events
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [
    pytest.mark.postgresql,
]


def test_every_run_recorded_with_its_outcome(pg_store: SQLAlchemyStore, broker_url: str) -> None:
    app = make_test_app(broker_url, store=pg_store)
    now = datetime.now(tz=UTC)
    task_type = new_sleep_type(pg_store)
    created = pg_store.create_tasks(sleep_tasks(task_type, 20, now), now=now)
    queue_name = unique_queue_name()
    listener = Listener(app, pg_store, rng=random.Random(1), options=options(queue_name))
    recorder = Recorder(listener)
    try:
        with listener_thread(listener):
            assert tick(pg_store, app, now).published == len(created) == 60
            with start_worker(
                app,
                pool="threads",
                concurrency=4,
                perform_ping_check=False,
                queues=[task_type.effective_queue],
                shutdown_timeout=10,
            ):
                wait_until(lambda: open_run_count(pg_store) == 0, 40, "every run to end")
    finally:
        delete_queues(app, task_type.effective_queue, queue_name)

    tasks = {t.id: t for t in pg_store.get_tasks([t.id or 0 for t in created])}
    runs = all_runs(pg_store)
    assert sorted(r.task_id for r in runs) == sorted(tasks), "one run per task"
    for run in runs:
        task = tasks[run.task_id]
        expected = expected_status(task)
        assert run.status == RunStatus(expected), (run, task.kwargs)
        assert run.started is not None and run.ended is not None and run.worker
        assert now <= run.started <= run.ended
        assert task.status is TaskStatus.WAITING
        assert task.next_run > now and task.last_end_at == run.ended
        assert task.owner_started_at is None
        if expected == "failed":
            assert task.failure_count == 1
            assert task.last_good_start_at == now - H and task.average_good_duration is None
            assert run.error and "simulated failure" in run.error
            assert task.next_run >= run.ended + timedelta(minutes=5)  # first retry delay
        else:
            assert task.failure_count == 0
            assert task.last_good_start_at == run.started
            assert task.last_good_end_at == run.ended
            assert task.average_good_duration == run.ended - run.started
            assert task.average_good_duration >= timedelta(seconds=0.01)
            assert run.result["status"] == expected
            # eventful: halved, from the gap since the previous visit (just over H)
            gap = run.started - (now - H)
            interval = min(H, gap / 2) if expected == "eventful" else H * 2
            assert task.current_interval == interval
            assert task.next_run == run.ended + interval

    # the same (real) events applied again change nothing
    before = snapshot(pg_store)
    again = handle_events(recorder.events, pg_store, rng=random.Random(2), lanes=4)
    assert again[Action.ENDED] == again[Action.STARTED] == 0
    # one start and one end per run; no task-result event: task-succeeded
    # carries the sleep task's small return value whole
    assert again[Action.DUPLICATE] == 2 * len(runs)
    assert not [e for e in recorder.events if e.get("type") == "task-result"]
    assert snapshot(pg_store) == before


@pytest.mark.rabbitmq
def test_start_listener_once_from_the_command_line(postgres_url: str) -> None:
    from click.testing import CliRunner
    from listenertest import broker

    import swh_like_scheduler.cli.listener  # noqa: F401 - registers the command
    from swh_like_scheduler.cli import swh

    url = broker("rabbitmq")
    queue_name = unique_queue_name()
    try:
        result = CliRunner().invoke(
            swh,
            [
                "scheduler",
                "--db-url",
                postgres_url,
                "start-listener",
                "--once",
                "--broker-url",
                url,
                "--queue-name",
                queue_name,
                "--batch-size",
                "10",
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        assert '"received": 0' in result.output
    finally:
        delete_queues(make_test_app(url), queue_name)
