"""1,000 tasks end to end, on PostgreSQL with Redis and with RabbitMQ.

The real runner (``swh scheduler start-runner`` subprocess) → a real
``celery -A swh_like_scheduler.celery_app worker -E -P threads -c 8``
subprocess running the example ``sleep`` task type (whose small return
value ``task-succeeded`` carries whole) → the real listener (:class:`Listener`). Tasks mix the
outcomes (eventful, uneventful, failed) and the schedules (adaptive,
periodic). Each task's state afterwards must be exactly what
:func:`policy.apply_outcome` computes from the run as recorded.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from listenertest import (
    KINDS,
    SLEEP_TASK,
    Recorder,
    all_runs,
    db_url_of,
    expected_status,
    listener_thread,
    make_test_app,
    open_run_count,
    options,
    unique_queue_name,
)
from waiting import delete_queues, wait_until

from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.listener import Action, BatchSummary, Listener
from swh_like_scheduler.policy import Outcome, apply_outcome, ewma
from swh_like_scheduler.store import SQLAlchemyStore

sys.path.insert(0, str(Path(__file__).parents[1] / "worker"))

from celeryproc import worker_process

pytestmark = [
    pytest.mark.postgresql,
]
HERE = Path(__file__).parent
H = timedelta(hours=1)
MIN = timedelta(minutes=1)
TASKS = 1000
#: the fields the listener's outcome writes, compared with the policy's
COMPARED = (
    "status",
    "next_run",
    "deadline",
    "current_interval",
    "failure_count",
    "retries_left",
    "last_good_start_at",
    "last_good_end_at",
    "last_start_at",
    "last_end_at",
    "average_good_duration",
    "owner_tag",
)


def thousand_type(store: SQLAlchemyStore) -> TaskType:
    return store.create_task_type(
        TaskType(
            type="thousand",
            backend_name=SLEEP_TASK,
            queue=f"swh-test-thousand-{uuid.uuid4().hex[:8]}",
            default_interval=H,
            min_interval=timedelta(minutes=10),
            max_interval=timedelta(days=1),
            backoff_factor=2.0,
            num_retries=1,  # 5 min < the 1 h period
            max_queue_length=2 * TASKS,
        )
    )


def thousand_tasks(task_type: TaskType, now: datetime) -> list[Task]:
    kinds = list(KINDS)
    tasks = []
    for n in range(TASKS):
        failure_rate, eventful_rate = kinds[n % len(kinds)]
        schedule: dict[str, Any] = (
            {"schedule_kind": ScheduleKind.ADAPTIVE, "current_interval": H}
            if n % 2 == 0
            # without a cooldown a periodic task may run again as soon as it ended
            else {"schedule_kind": ScheduleKind.PERIODIC, "period": H, "cooldown": 50 * MIN}
        )
        tasks.append(
            Task(
                type=task_type.type,
                kwargs={
                    "duration": 0,
                    "failure_rate": failure_rate,
                    "eventful_rate": eventful_rate,
                    "seed": n,
                },
                next_run=now - H,
                deadline=now + timedelta(milliseconds=n),
                **schedule,
            )
        )
    return tasks


def run_count(store: SQLAlchemyStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM task_run").scalar_one())


def prior_average(n: int) -> timedelta:
    return timedelta(milliseconds=100 * (n % 7 + 1))


def counting(listener: Listener) -> BatchSummary:
    """Sum what every batch of ``listener`` did (wraps its handler)."""
    total = BatchSummary()
    handler = listener.handler
    real = handler.handle_batch

    def summing(events: Any, **kwargs: Any) -> BatchSummary:
        summary = real(events, **kwargs)
        total.merge(summary)
        return summary

    handler.handle_batch = summing  # type: ignore[method-assign]
    return total


@pytest.fixture
def runner_process(postgres_url: str, broker_url: str, tmp_path: Path) -> Iterator[Any]:
    processes: list[subprocess.Popen[bytes]] = []
    log = (tmp_path / "runner.log").open("wb")

    def start() -> subprocess.Popen[bytes]:
        swh = Path(sys.executable).parent / "swh"
        process = subprocess.Popen(
            [
                str(swh),
                "scheduler",
                "--db-url",
                postgres_url,
                "start-runner",
                "--broker-url",
                broker_url,
                "--period",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
    log.close()


def test_thousand_tasks_end_to_end(
    pg_store: SQLAlchemyStore, broker_url: str, runner_process: Any, tmp_path: Path
) -> None:
    store = pg_store
    app = make_test_app(broker_url, store=store)
    now = datetime.now(tz=UTC)
    task_type = thousand_type(store)
    created = store.create_tasks(thousand_tasks(task_type, now), now=now)
    with store.transaction() as tx:  # some tasks have a duration history to fold into
        for n, task in enumerate(created):
            if n % 5 in (1, 2):
                tx.update_task(task.updated(average_good_duration=prior_average(n)))
    before = {t.id: t for t in store.get_tasks([t.id or 0 for t in created])}
    queue_name = unique_queue_name()
    listener = Listener(app, store, rng=random.Random(1), options=options(queue_name))
    recorder = Recorder(listener)
    summary = counting(listener)
    started = time.monotonic()
    try:
        with (
            listener_thread(listener),
            worker_process(
                "swh_like_scheduler.celery_app",
                queues=[task_type.effective_queue],
                env={
                    "CELERY_CONFIG_MODULE": "thousandconfig",
                    "SWH_TEST_THOUSAND_BROKER": broker_url,
                    "SWH_SCHEDULER_DB_URL": db_url_of(store),
                },
                pool="threads",
                concurrency=8,
                events=True,
                name="thousand",
                loglevel="CRITICAL",  # not a traceback per simulated failure
                paths=(HERE,),
            ),
        ):
            runner = runner_process()
            try:
                wait_until(
                    lambda: open_run_count(store) == 0 and run_count(store) == TASKS,
                    60,
                    "every run to be recorded",
                )
            except AssertionError:
                print("runs", run_count(store), "open", open_run_count(store), summary.counts)
                print((tmp_path / "runner.log").read_text()[-3000:])
                raise
            assert runner.poll() is None, "the runner died"
            wait_until(lambda: summary[Action.ENDED] == TASKS, 10, "the listener's count")
    finally:
        delete_queues(app, task_type.effective_queue, queue_name)
    elapsed = time.monotonic() - started
    print(f"{TASKS} tasks through runner, worker and listener in {elapsed:.1f} s")

    runs = all_runs(store)
    assert sorted(r.task_id for r in runs) == sorted(before), "one run per task"
    assert summary[Action.ENDED] == TASKS, "each run ended exactly once"
    tasks = {t.id: t for t in store.get_tasks(list(before))}
    statuses: dict[RunStatus, int] = {}
    for run in runs:
        task, old = tasks[run.task_id], before[run.task_id]
        expected_run_status = RunStatus(expected_status(old))
        assert run.status is expected_run_status, (run, old.kwargs)
        statuses[run.status] = statuses.get(run.status, 0) + 1
        assert run.started is not None and run.ended is not None and run.worker
        assert now <= run.started <= run.ended
        if run.status is RunStatus.FAILED:
            assert run.error and "simulated failure" in run.error
        else:
            assert run.result["status"] == run.status.value  # the real return value
        outcome = Outcome(
            status=run.status,
            ended=run.ended,
            started=run.started,
            slot=run.slot,
            backend_id=run.backend_id,
        )
        expected = apply_outcome(old, task_type, outcome, rng=random.Random(0))
        if expected.status is TaskStatus.SCHEDULED:
            expected = expected.updated(status=TaskStatus.WAITING)
        differ = {
            name: (getattr(task, name), getattr(expected, name))
            for name in COMPARED
            if getattr(task, name) != getattr(expected, name)
        }
        assert not differ, (task.id, task.schedule_kind, run.status, differ)
        # the policy's rules, seen on the stored task
        assert task.status is TaskStatus.WAITING and task.next_run > now
        if run.status is RunStatus.FAILED:
            assert task.failure_count == 1
            assert task.average_good_duration == old.average_good_duration  # unchanged
            assert task.next_run >= run.ended + task_type.retry_delay
        else:
            assert task.last_good_start_at == run.started
            assert task.last_good_end_at == run.ended
            last = run.ended - run.started
            assert task.average_good_duration == ewma(old.average_good_duration, last)
            if old.average_good_duration is None:
                assert task.average_good_duration == last
            else:  # 0.37 of the last run, 0.63 of the history
                assert abs(
                    task.average_good_duration - (0.37 * last + 0.63 * old.average_good_duration)
                ) <= timedelta(microseconds=2)
        if task.schedule_kind is ScheduleKind.PERIODIC and run.status is not RunStatus.FAILED:
            # should_start_by = reference start + period - average duration
            assert task.period is not None and task.average_good_duration is not None
            assert task.deadline == run.started + task.period - task.average_good_duration
    third = TASKS // 3
    assert statuses[RunStatus.EVENTFUL] >= third and statuses[RunStatus.UNEVENTFUL] >= third
    assert statuses[RunStatus.FAILED] >= third
    # every good run's outcome came from its real return value, read back
    # whole from task-succeeded: no second (task-result) event was needed
    assert not [e for e in recorder.events if e.get("type") == "task-result"]
    for run in runs:
        if run.status is not RunStatus.FAILED:
            assert set(run.result) == {"status", "duration", "worker"}
    assert elapsed < 60
