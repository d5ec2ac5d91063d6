"""No outcome lost: the durable queue (RabbitMQ), catch-up (Redis), a burst."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from listenertest import (
    H,
    all_runs,
    broker,
    db_url_of,
    expected_status,
    listener_thread,
    make_test_app,
    new_sleep_type,
    open_run_count,
    options,
    sleep_tasks,
    unique_queue_name,
    wait_until,
)
from waiting import delete_queues

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskStatus
from swh_like_scheduler.listener import Action, Listener, catch_up
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [
    pytest.mark.postgresql,
]


#: runs that end while the first listener runs or after it stopped
RUNS = 500


def slow(tasks: list[Task], duration: float) -> list[Task]:
    return [t.updated(kwargs={**t.kwargs, "duration": duration}) for t in tasks]


@pytest.mark.rabbitmq
@pytest.mark.redis
def test_runs_ending_while_the_listener_is_stopped_are_recorded_once(
    pg_store: SQLAlchemyStore,
) -> None:
    # the result backend only tells the test when every task has run
    app = make_test_app(broker("rabbitmq"), store=pg_store, result_backend=broker("redis"))
    now = datetime.now(tz=UTC)
    task_type = new_sleep_type(pg_store)
    # 500 runs (a third each eventful, uneventful, failing)
    created = pg_store.create_tasks(slow(sleep_tasks(task_type, 167, now)[:RUNS], 0.02), now=now)
    queue_name = unique_queue_name()
    first = Listener(app, pg_store, rng=random.Random(1), options=options(queue_name))
    try:
        with start_worker(
            app,
            pool="threads",
            concurrency=8,
            perform_ping_check=False,
            queues=[task_type.effective_queue],
            shutdown_timeout=10,
        ):
            with listener_thread(first):
                claimed = tick(pg_store, app, now)
                assert claimed.published == RUNS
                wait_until(lambda: open_run_count(pg_store) <= RUNS - 10, 30, "a few runs recorded")
            # the first listener is stopped; the worker goes on
            ids = [r.backend_id for r in all_runs(pg_store)]
            wait_until(lambda: all(app.AsyncResult(i).ready() for i in ids), 60, "every run")
        assert open_run_count(pg_store) > 0, "some runs ended while no listener ran"
        second = Listener(app, pg_store, rng=random.Random(2), options=options(queue_name))
        second.run(once=True)
    finally:
        delete_queues(app, task_type.effective_queue, queue_name)

    assert open_run_count(pg_store) == 0
    assert first.stats.applied[Action.ENDED] + second.stats.applied[Action.ENDED] == RUNS
    assert second.stats.applied[Action.ENDED] > 0
    tasks = {t.id: t for t in pg_store.get_tasks([t.id or 0 for t in created])}
    runs = all_runs(pg_store)
    assert sorted(r.task_id for r in runs) == sorted(tasks)
    for run in runs:
        task = tasks[run.task_id]
        assert run.status == RunStatus(expected_status(task))
        assert task.status is TaskStatus.WAITING and task.last_end_at == run.ended
        assert task.failure_count == (1 if run.status is RunStatus.FAILED else 0)


@pytest.mark.redis
def test_catch_up_records_runs_whose_events_were_lost(pg_store: SQLAlchemyStore) -> None:
    url = broker("redis")
    app = make_test_app(url, store=pg_store, result_backend=url)
    now = datetime.now(tz=UTC)
    task_type = new_sleep_type(pg_store)
    created = pg_store.create_tasks(sleep_tasks(task_type, 5, now), now=now)
    try:
        # no listener: on Redis every event of these runs is lost
        assert tick(pg_store, app, now).published == 15
        ids = [r.backend_id for r in all_runs(pg_store)]
        with start_worker(
            app,
            pool="threads",
            concurrency=4,
            perform_ping_check=False,
            queues=[task_type.effective_queue],
            shutdown_timeout=10,
        ):
            wait_until(lambda: all(app.AsyncResult(i).ready() for i in ids), 20, "every run")
        assert open_run_count(pg_store) == 15
        early = catch_up(pg_store, app, older_than=now, rng=random.Random(0))
        assert (early.checked, early.recorded) == (0, 0)  # recent runs are left to events
        later = now + timedelta(seconds=1)
        report = catch_up(pg_store, app, older_than=later, rng=random.Random(0))
        assert (report.checked, report.recorded, report.unfinished) == (15, 15, 0)
        assert catch_up(pg_store, app, older_than=later, rng=random.Random(0)).checked == 0
    finally:
        delete_queues(app, task_type.effective_queue)
        for backend_id in ids:
            app.AsyncResult(backend_id).forget()

    tasks = {t.id: t for t in pg_store.get_tasks([t.id or 0 for t in created])}
    for run in all_runs(pg_store):
        task = tasks[run.task_id]
        assert run.status == RunStatus(expected_status(task))
        assert run.ended is not None and run.ended >= now
        assert task.status is TaskStatus.WAITING and task.next_run > now
        if run.status is RunStatus.FAILED:
            assert task.failure_count == 1 and run.error and "simulated failure" in run.error
        else:
            assert task.last_good_end_at == run.ended


@pytest.mark.redis
def test_a_listener_restarted_every_20_s_catches_up(
    pg_store: SQLAlchemyStore, tmp_path: Path
) -> None:
    """Each ``start-listener`` process catches up once at start: a listener
    restarted more often than ``--catch-up-every`` still records the runs
    whose events were lost (Redis events are pub/sub)."""
    url = broker("redis")
    app = make_test_app(url, store=pg_store, result_backend=url)
    task_type = new_sleep_type(pg_store)
    env = {
        **os.environ,
        "SWH_SCHEDULER_DB_URL": db_url_of(pg_store),
        "SWH_SCHEDULER_BROKER_URL": url,
        "SWH_SCHEDULER_RESULT_BACKEND": url,
    }
    command = [
        str(Path(sys.executable).parent / "swh"),
        "scheduler",
        "start-listener",
        "--queue-name",
        unique_queue_name(),
        "--catch-up-every",
        "60",
        "--catch-up-delay",
        "0",
    ]
    ids: list[str] = []
    try:
        for cycle in range(2):
            now = datetime.now(tz=UTC)
            tasks = sleep_tasks(task_type, 2, now)
            pg_store.create_tasks([t.updated(args=(cycle,)) for t in tasks], now=now)
            claimed = pg_store.claim_ready_tasks(task_type.type, now=now, limit=100)
            # their worker ended them while no listener listened: only the
            # result backend knows
            for c in claimed:
                app.backend.store_result(c.backend_id, {"status": "uneventful"}, "SUCCESS")
                ids.append(c.backend_id)
            log = (tmp_path / f"listener-{cycle}.log").open("wb")
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
            started = time.monotonic()
            try:
                wait_until(lambda: open_run_count(pg_store) == 0, 15, "runs caught up")
            finally:
                process.send_signal(signal.SIGTERM)  # restarted every 20 s at most
                process.wait(20)
                log.close()
            assert time.monotonic() - started < 20
            statuses = {r.status for r in all_runs(pg_store)}
            assert statuses == {RunStatus.UNEVENTFUL}, statuses
    finally:
        for backend_id in ids:
            app.AsyncResult(backend_id).forget()


@pytest.mark.rabbitmq
def test_burst_of_outcomes(pg_store: SQLAlchemyStore) -> None:
    """Events of ``SWH_TEST_LISTENER_BURST`` outcomes (default 1000) published to
    the durable queue at once, then drained: every run ended, and the rate."""
    count = int(os.environ.get("SWH_TEST_LISTENER_BURST", "1000"))
    app = make_test_app(broker("rabbitmq"), store=pg_store)
    now = datetime.now(tz=UTC)
    task_type = new_sleep_type(pg_store)
    pg_store.import_tasks(
        (
            Task(
                type=task_type.type,
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=now - H,
                deadline=now,
            )
            for n in range(count)
        ),
        now=now,
        batch_size=5000,
    )
    claimed = pg_store.claim_ready_tasks(task_type.type, now=now, limit=count)
    assert len(claimed) == count
    queue_name = unique_queue_name()
    opts = options(queue_name, batch_size=1000, idle_timeout=0.5)
    try:
        Listener(app, pg_store, rng=random.Random(0), options=opts).run(once=True)  # declare
        with app.connection_for_write() as conn:
            dispatcher = app.events.Dispatcher(conn)
            for c in claimed:
                at = now.timestamp()
                dispatcher.send("task-started", uuid=c.backend_id, timestamp=at)
                dispatcher.send(
                    "task-succeeded",
                    uuid=c.backend_id,
                    timestamp=at + 0.5,
                    runtime=0.5,
                    result="{'status': 'eventful'}",
                )
            dispatcher.close()
        listener = Listener(app, pg_store, rng=random.Random(0), options=opts)
        started = time.perf_counter()
        stats = listener.run(once=True)
        seconds = time.perf_counter() - started - opts.idle_timeout
    finally:
        delete_queues(app, queue_name)
    assert stats.applied[Action.ENDED] == stats.applied[Action.STARTED] == count
    assert open_run_count(pg_store) == 0
    print(
        f"\nburst: {count} outcomes ({2 * count} events) in {seconds:.2f}s: "
        f"{2 * count / seconds:.0f} events/s end to end, "
        f"{stats.events_per_second:.0f} events/s of store writes, {stats.batches} batches"
    )
