"""The start guard of every task type, end to end: real PostgreSQL, real
brokers (Redis and RabbitMQ), real Celery workers (in-process threads and
``celery worker`` subprocesses with the prefork pool), the real runner pass
and re-publish duty. Executions are counted by the task body itself (in
Redis), never from the scheduler's own tables."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import services
from celery import Celery, signals
from celery.contrib.testing.worker import start_worker
from celery.worker import state as worker_state
from waiting import delete_queues, wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import (
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.listener import Listener
from swh_like_scheduler.policy import condition
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.worker import StartRefused

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "listener"))

import leaseapp
from celeryproc import kill_group, start_worker_process, worker_process
from listenertest import listener_thread, options, unique_queue_name

pytestmark = [
    pytest.mark.postgresql,
    pytest.mark.redis,  # the tasks count what they do in Redis, whatever the broker
]


@pytest.fixture
def counter() -> redis.Redis:
    return redis.Redis.from_url(services.require("redis", services.redis_url))


@pytest.fixture
def queue() -> str:
    return f"swh-test-guard-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def app(broker_url: str, postgres_url: str, queue: str) -> Iterator[Celery]:
    app = leaseapp.build(broker_url, postgres_url, services.redis_url(), 1.0)
    yield app
    delete_queues(app, queue)


def plain_tasks(store: SQLAlchemyStore, queue: str, *durations: float) -> list[Task]:
    """One-shot tasks of a type whose worker has only the guard, ready now."""
    if store.get_task_type("plain") is None:
        store.create_task_type(
            TaskType(
                type="plain",
                backend_name=leaseapp.PLAIN_TASK,
                queue=queue,
                default_interval=timedelta(hours=1),
                max_queue_length=100,
            )
        )
    now = datetime.now(UTC) - timedelta(seconds=5)
    return store.create_tasks(
        [
            Task(
                type="plain",
                args=(i,),
                kwargs={"duration": d},
                next_run=now,
                deadline=now + timedelta(seconds=1),
                schedule_kind=ScheduleKind.ONESHOT,
            )
            for i, d in enumerate(durations)
        ],
        now=now,
    )


def only_run(store: SQLAlchemyStore, task: Task) -> TaskRun:
    [run] = store.get_task_runs(task.id or 0)
    return run


def executions(counter: redis.Redis, run: TaskRun) -> int:
    return int(counter.get(leaseapp.executions_key(run.backend_id)) or 0)


def release(counter: redis.Redis, run: TaskRun) -> None:
    """End ``run``'s work at its next step (see :func:`leaseapp.release_key`)."""
    counter.set(leaseapp.release_key(run.backend_id), 1, ex=600)


def refusals(counter: redis.Redis, run: TaskRun) -> list[str]:
    found = counter.lrange(leaseapp.refusals_key(run.backend_id), 0, -1)
    return [r.decode() if isinstance(r, bytes) else str(r) for r in found]


def history(store: SQLAlchemyStore, run: TaskRun) -> list[str]:
    stored = store.get_task_run(run.backend_id)
    assert stored is not None
    return [h["event"] for h in stored.history]


def worker_env(broker_url: str, postgres_url: str) -> dict[str, str]:
    """The environment of a ``celery -A leaseapp worker`` subprocess."""
    return {
        "LEASE_TEST_BROKER": broker_url,
        "LEASE_TEST_REDIS": services.redis_url(),
        "SWH_SCHEDULER_DB_URL": postgres_url,
    }


def threads_worker(app: Celery, queue: str, *, concurrency: int = 4) -> Any:
    return start_worker(
        app,
        pool="threads",
        concurrency=concurrency,
        perform_ping_check=False,
        queues=[queue],
        loglevel="WARNING",
        shutdown_timeout=15,
    )


@contextlib.contextmanager
def listening_worker(app: Celery, queue: str) -> Iterator[None]:
    """A worker on one thread, entered once its remote control answers (on
    Redis a broadcast sent before it subscribed is lost). One thread, not
    the solo pool: a solo pool's blocked consumer missed the broker's 2 s
    heartbeats on RabbitMQ and lost the broadcast with the connection."""
    with threads_worker(app, queue, concurrency=1):
        wait_until(lambda: app.control.ping(timeout=0.5), 30, "the worker's remote control")
        yield


def cli_cancel(postgres_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``swh scheduler task cancel ARGS`` run as an operator runs it."""
    swh = Path(sys.executable).parent / "swh"
    return subprocess.run(
        [str(swh), "scheduler", "--db-url", postgres_url, "task", "cancel", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def wait_worker_idle(app: Celery, queue: str, what: str) -> None:
    """Until the queue is empty and the worker holds no message."""
    wait_until(
        lambda: (
            queue_depth(app, queue) == 0
            and not worker_state.active_requests
            and not worker_state.reserved_requests
        ),
        30,
        what,
    )


def test_republished_queued_messages_run_once(
    pg_store: SQLAlchemyStore, app: Celery, queue: str, counter: redis.Redis
) -> None:
    """Three runs dispatched while no worker runs, sent a second time (a
    broker redelivery, a re-publish that cannot see the queue): six messages,
    three executions; each second copy is refused and noted on its run."""
    store = pg_store
    tasks = plain_tasks(store, queue, 0.3, 0.3, 0.3)
    assert tick(store, app, datetime.now(UTC)).published == 3
    later = datetime.now(UTC) + timedelta(seconds=1)
    assert leaseapp.send_again(store, app, later) == 3
    runs = [only_run(store, t) for t in tasks]
    with threads_worker(app, queue):
        wait_until(
            lambda: (
                all(len(refusals(counter, r)) == 1 for r in runs)
                and sum(executions(counter, r) for r in runs) >= 3
            ),
            30,
            "every run to execute and its copy to be refused",
        )
    assert [executions(counter, r) for r in runs] == [1, 1, 1]
    for run in runs:
        assert refusals(counter, run)[0] in ("already_running", "finished_run")
        assert history(store, run) == ["republished", "assigned", "refused_copy"]
        stored = store.get_task_run(run.backend_id)
        assert stored is not None and stored.worker is not None and stored.started is not None


def test_cancel_with_the_message_queued_runs_nothing(
    pg_store: SQLAlchemyStore, app: Celery, queue: str, counter: redis.Redis
) -> None:
    store = pg_store
    [task] = plain_tasks(store, queue, 0.2)
    assert tick(store, app, datetime.now(UTC)).published == 1
    run = only_run(store, task)
    [cancelled] = store.cancel_tasks([task.id or 0], now=datetime.now(UTC))
    assert cancelled.status is TaskStatus.CANCELLED
    with threads_worker(app, queue):
        wait_until(lambda: refusals(counter, run) != [], 30, "the queued copy to be refused")
    assert executions(counter, run) == 0
    assert refusals(counter, run) == ["finished_run"]
    stored = store.get_task_run(run.backend_id)
    assert stored is not None and stored.status is RunStatus.CANCELLED
    assert history(store, run) == ["refused_copy"]


def test_a_refusal_never_harms_a_prefork_worker(
    pg_store: SQLAlchemyStore,
    app: Celery,
    queue: str,
    counter: redis.Redis,
    broker_url: str,
    postgres_url: str,
) -> None:
    """The refusal crosses the prefork pool pickled; the worker goes on and
    runs the next task."""
    store = pg_store
    first, second = plain_tasks(store, queue, 0.2, 0.2)
    env = worker_env(broker_url, postgres_url)
    with worker_process(
        "leaseapp", queues=[queue], env=env, pool="prefork", concurrency=1, name="prefork"
    ) as process:
        store.disable_tasks([second.id or 0], now=datetime.now(UTC))
        assert tick(store, app, datetime.now(UTC)).published == 1
        run = only_run(store, first)
        wait_until(lambda: executions(counter, run) == 1, 60, "the first run to execute")
        # the same message again, as a broker redelivers it
        app.send_task(leaseapp.PLAIN_TASK, args=(0,), task_id=run.backend_id, queue=queue)
        wait_until(lambda: refusals(counter, run) != [], 30, "the copy to be refused")
        store.enable_tasks([second.id or 0], now=datetime.now(UTC))
        assert tick(store, app, datetime.now(UTC)).published == 1
        next_run = only_run(store, second)
        wait_until(lambda: executions(counter, next_run) == 1, 30, "the next task to run")
        assert process.poll() is None, "the worker died"
    assert executions(counter, run) == 1


def test_the_refusal_pickles() -> None:
    import pickle

    again = pickle.loads(pickle.dumps(StartRefused("already_running", "abc")))
    assert isinstance(again, StartRefused)
    assert (again.reason, again.backend_id) == ("already_running", "abc")
    assert "already_running" in str(again)


def test_cancel_from_the_cli_revokes_the_queued_run(
    pg_store: SQLAlchemyStore,
    app: Celery,
    queue: str,
    counter: redis.Redis,
    broker_url: str,
    postgres_url: str,
) -> None:
    """``swh scheduler task cancel`` while a live worker is busy with another
    run: the revoke reaches the worker and the body never runs. Whether the
    worker drops the message on the revoke or hands it to the guard (which
    refuses it) depends on whether Celery read the revoke before taking the
    message from its prefetch: either way, no execution."""
    store = pg_store
    # busy for longer than the command line takes to start and cancel (on a
    # loaded machine 2 s was not: the victim ran before the cancel came)
    busy, victim = plain_tasks(store, queue, 15.0, 0.1)
    with listening_worker(app, queue):
        assert tick(store, app, datetime.now(UTC)).published == 2
        busy_run, victim_run = only_run(store, busy), only_run(store, victim)
        wait_until(lambda: executions(counter, busy_run) == 1, 30, "the busy run to start")
        done = cli_cancel(postgres_url, "--broker-url", broker_url, str(victim.id))
        assert done.returncode == 0, done.stderr
        assert f"Task {victim.id}: cancelled" in done.stdout
        wait_until(lambda: victim_run.backend_id in worker_state.revoked, 40, "the revoke")
        release(counter, busy_run)  # busy no longer: the revoke came first
        wait_worker_idle(app, queue, "the worker to be done with both messages")
    assert executions(counter, busy_run) == 1
    assert executions(counter, victim_run) == 0
    assert refusals(counter, victim_run) in ([], ["finished_run"])
    stored = store.get_task_run(victim_run.backend_id)
    assert stored is not None and stored.status is RunStatus.CANCELLED


def test_bulk_cancel_from_the_cli_revokes_the_queued_runs(
    pg_store: SQLAlchemyStore,
    app: Celery,
    queue: str,
    counter: redis.Redis,
    broker_url: str,
    postgres_url: str,
) -> None:
    """``task cancel`` on a filter (the two short tasks, by argument) while
    the worker is busy with the long one: both queued runs are revoked and
    never run; the long one, not matched, runs to its end."""
    store = pg_store
    # busy for longer than the command line takes to start and cancel
    busy, *victims = plain_tasks(store, queue, 15.0, 0.1, 0.1)
    with listening_worker(app, queue):
        assert tick(store, app, datetime.now(UTC)).published == 3
        busy_run = only_run(store, busy)
        victim_runs = [only_run(store, v) for v in victims]
        wait_until(lambda: executions(counter, busy_run) == 1, 30, "the busy run to start")
        cancel_args = ["--type", "plain", "--arg-match", "duration=0.1", "--yes"]
        done = cli_cancel(postgres_url, *cancel_args, "--broker-url", broker_url)
        assert done.returncode == 0, done.stderr
        assert "Cancelled 2 tasks." in done.stdout
        wait_until(
            lambda: all(r.backend_id in worker_state.revoked for r in victim_runs),
            40,
            "the revokes",
        )
        release(counter, busy_run)  # busy no longer: the revokes came first
        wait_worker_idle(app, queue, "the worker to be done with the three messages")
    assert executions(counter, busy_run) == 1
    for run in victim_runs:
        assert executions(counter, run) == 0
        stored = store.get_task_run(run.backend_id)
        assert stored is not None and stored.status is RunStatus.CANCELLED
    [still] = store.get_tasks([busy.id or 0])
    assert still.status is not TaskStatus.CANCELLED


@contextlib.contextmanager
def listening(app: Celery, store: SQLAlchemyStore) -> Iterator[Listener]:
    """The listener in a thread, on its own event queue, until the block ends."""
    queue_name = unique_queue_name()
    listener = Listener(app, store, rng=random.Random(0), options=options(queue_name))
    try:
        with listener_thread(listener):
            yield listener
    finally:
        delete_queues(app, queue_name)


def test_a_plain_run_past_its_limits_warns_then_is_stopped(
    pg_store: SQLAlchemyStore,
    app: Celery,
    queue: str,
    counter: redis.Redis,
    broker_url: str,
    postgres_url: str,
) -> None:
    """A plain (not leased) type with max_expected_duration 1 s and
    max_allowed_duration 3 s, a body that would work 60 s, a prefork
    worker: the task is WARNING while it runs past 1 s, the runner's time
    limit stops the body at 3 s, and the run ends ``timed_out``."""
    store = pg_store
    limited = store.create_task_type(
        TaskType(
            type="limited",
            backend_name=leaseapp.PLAIN_TASK,
            queue=queue,
            default_interval=timedelta(hours=1),
            max_expected_duration=timedelta(seconds=1),
            max_allowed_duration=timedelta(seconds=3),
        )
    )
    now = datetime.now(UTC) - timedelta(seconds=5)
    [task] = store.create_tasks(
        [
            Task(
                type="limited",
                kwargs={"duration": 60},
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(hours=1),
                next_run=now,
                deadline=now + timedelta(hours=1),
            )
        ],
        now=now,
    )
    env = worker_env(broker_url, postgres_url)
    with (
        listening(app, store),
        worker_process(
            "leaseapp", queues=[queue], env=env, pool="prefork", concurrency=1, events=True
        ),
    ):
        assert tick(store, app, datetime.now(UTC)).published == 1
        run = only_run(store, task)
        wait_until(lambda: executions(counter, run) == 1, 60, "the body to run")

        def reason() -> str:
            [current] = store.get_tasks([task.id or 0])
            return str(condition(current, limited, datetime.now(UTC)).reason)

        wait_until(lambda: reason() == "overran_expected_duration", 10, "the WARNING")
        wait_until(
            lambda: not only_run(store, task).status.is_open, 20, "the time limit to stop it"
        )
    ended = only_run(store, task)
    assert ended.status is RunStatus.TIMED_OUT, ended
    assert ended.error is not None and "time limit" in ended.error
    assert ended.started is not None and ended.ended is not None
    lasted = (ended.ended - ended.started).total_seconds()
    print(f"the run lasted {lasted:.2f} s (limit 3 s)")
    # the soft limit runs from the pool's start of the job, a little before the
    # guard stamps the start; then a loaded machine's delays
    assert 2.5 <= lasted <= 3 + 5
    steps = int(counter.get(leaseapp.steps_key(run.backend_id)) or 0)
    assert steps < 60 / 0.05 / 2, "the body was not stopped"
    [after] = store.get_tasks([task.id or 0])
    assert after.failure_count == 1 and after.owner_tag is None


def test_a_database_error_at_start_is_a_retry_not_a_failure(
    pg_store: SQLAlchemyStore, app: Celery, queue: str, counter: redis.Redis, postgres_url: str
) -> None:
    """The guard cannot reach the database: the delivery is retried with the
    same id (Celery's ``task-retried``: the run stays open), the body does
    not run and nothing fails; once the database answers, it runs once."""
    store = pg_store
    [task] = plain_tasks(store, queue, 0.1)
    assert tick(store, app, datetime.now(UTC)).published == 1
    run = only_run(store, task)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    app.conf.swh_scheduler_db_url = f"postgresql://postgres@127.0.0.1:{closed}/nowhere"
    retried: list[str] = []
    failed: list[str] = []

    def on_retry(request: Any = None, **_: Any) -> None:
        retried.append(request.id)

    def on_failure(task_id: str | None = None, **_: Any) -> None:
        failed.append(str(task_id))

    signals.task_retry.connect(on_retry, weak=False)
    signals.task_failure.connect(on_failure, weak=False)
    try:
        with threads_worker(app, queue):
            wait_until(lambda: run.backend_id in retried, 30, "a retried delivery")
            assert executions(counter, run) == 0
            app.conf.swh_scheduler_db_url = postgres_url  # the database is back
            wait_until(lambda: executions(counter, run) == 1, 30, "the run to execute")
    finally:
        signals.task_retry.disconnect(on_retry)
        signals.task_failure.disconnect(on_failure)
    assert failed == []
    stored = store.get_task_run(run.backend_id)
    assert stored is not None and stored.status is RunStatus.STARTED
    assert history(store, run) == ["assigned"]


def test_a_worker_back_under_its_name_after_kill_9_frees_its_runs_after_the_grace(
    pg_store: SQLAlchemyStore,
    app: Celery,
    queue: str,
    counter: redis.Redis,
    broker_url: str,
    postgres_url: str,
) -> None:
    """kill -9 sends no worker-offline; the same ``-n name@node`` started
    again says worker-online from a new process: the listener puts the dead
    process's copy on notice at once (no ping timeout to wait for), the
    monitor takes its run after the grace (the copy renews nothing), and the
    task runs again, once."""
    store = pg_store
    [task] = plain_tasks(store, queue, 60.0)
    hostname = f"phoenix-{uuid.uuid4().hex[:6]}@guard-test"
    env = worker_env(broker_url, postgres_url)

    def start() -> subprocess.Popen[bytes]:
        return start_worker_process(
            "leaseapp", queues=[queue], env=env, events=True, hostname=hostname
        )

    with listening(app, store):
        first = start()
        try:
            assert tick(store, app, datetime.now(UTC)).published == 1
            run = only_run(store, task)
            wait_until(lambda: executions(counter, run) == 1, 60, "the body to run")
        finally:
            kill_group(first)  # SIGKILL: no worker-offline event
        assert only_run(store, task).status is RunStatus.STARTED
        with worker_process_of(start()):
            wait_until(
                lambda: history(store, only_run(store, task))[-1] == "pinged_late",
                30,
                "the restart to put the copy on notice",
            )
            hour = timedelta(hours=1)  # the ping timeout plays no part: the notice was given

            def taken() -> bool:
                store.steal_expired_leases(ping_timeout=hour, grace=timedelta(seconds=1))
                return only_run(store, task).status is RunStatus.LOST

            wait_until(taken, 30, "the monitor to take the run after the grace")
            lost = only_run(store, task)
            assert history(store, lost)[-2:] == ["pinged_late", "stolen"]
            store.update_task(store.get_tasks([task.id or 0])[0].updated(kwargs={"duration": 0.1}))
            assert tick(store, app, datetime.now(UTC)).published == 1
            second = next(r for r in store.get_task_runs(task.id or 0) if r.id != run.id)
            wait_until(lambda: executions(counter, second) == 1, 30, "the run again")
    assert executions(counter, run) == 1


@contextlib.contextmanager
def worker_process_of(process: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield process
    finally:
        kill_group(process)
