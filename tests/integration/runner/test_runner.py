"""The runner against real PostgreSQL, Redis and RabbitMQ, and real Celery workers."""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import redis
import services
from celery import Celery
from celery.contrib.testing.worker import start_worker
from click.testing import CliRunner
from cuts import scale
from prometheus_client import REGISTRY
from runnertest import executed_key, make_test_app, new_type, ready_tasks
from waiting import delete_queues as purge
from waiting import wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.cli import swh
from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import (
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskStatus,
)
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.runner import loop
from swh_like_scheduler.runner.wakeup import PostgresWaker, waker_for
from swh_like_scheduler.store import SQLAlchemyStore, TaskFilter


@pytest.fixture
def recorder() -> redis.Redis:
    """Where the recording task notes the Celery ids it executed."""
    return redis.Redis.from_url(services.require("redis", services.redis_url))


#: the bounded type's queue limit (it has twice as many ready tasks) and the
#: unbounded type's ready tasks, in the quick cut and the full one
#: (``SWH_SLOW=full``)
LIMIT = scale(600, 3000)
UNBOUNDED = scale(800, 4000)


def test_one_pass_honours_capacity_and_deadline_order(
    pg_store: SQLAlchemyStore, postgres_url: str, broker_url: str, recorder: redis.Redis
) -> None:
    app = make_test_app(broker_url)
    now = datetime.now(tz=UTC)
    bounded, unbounded = new_type(pg_store, LIMIT), new_type(pg_store, None)
    key = executed_key(bounded.effective_queue)
    pg_store.import_tasks(ready_tasks(bounded, 2 * LIMIT, now), now=now)
    pg_store.import_tasks(ready_tasks(unbounded, UNBOUNDED, now), now=now)
    try:
        result = CliRunner().invoke(
            swh,
            [
                "scheduler",
                "--db-url",
                postgres_url,
                "start-runner",
                "--once",
                "--broker-url",
                broker_url,
            ],
        )
        assert result.exit_code == 0, result.output

        def depths() -> tuple[int, int]:
            return (
                queue_depth(app, bounded.effective_queue),
                queue_depth(app, unbounded.effective_queue),
            )

        # RabbitMQ counts a queue's messages a moment after accepting them
        wait_until(
            lambda: depths() == (LIMIT, UNBOUNDED),
            15,
            f"depths ({LIMIT}, {UNBOUNDED}): {result.output}",
        )
        # the bounded type got its LIMIT most urgent tasks
        pending = pg_store.list_pending(bounded.type, now=now, limit=10_000)
        assert len(pending) == LIMIT
        claimed = [
            t
            for t in pg_store.search_tasks(limit=20_000)
            if t.type == bounded.type and t.status is TaskStatus.SCHEDULED
        ]
        assert max(t.deadline for t in claimed) <= min(t.deadline for t in pending)
        claimed_metric = REGISTRY.get_sample_value(
            "swh_scheduler_runner_claimed_tasks_total", {"task_type": bounded.type}
        )
        assert claimed_metric == LIMIT
        # a second pass finds the queue full and claims nothing more
        again = tick(pg_store, app, now)
        second = {t.task_type: t for t in again.types}[bounded.type]
        assert second.claimed == 0, second.describe()
        # a real worker executes every message of the bounded queue, each once
        expected = {pg_store.get_task_runs(t.id or 0)[0].backend_id for t in claimed}
        with start_worker(
            app,
            pool="threads",
            concurrency=8,
            perform_ping_check=False,
            queues=[bounded.effective_queue],
            shutdown_timeout=30,
        ):
            wait_until(lambda: recorder.llen(key) >= LIMIT, 120, f"{LIMIT} executions")
        executed = [v.decode() for v in recorder.lrange(key, 0, -1)]
        assert len(executed) == LIMIT, (len(executed), len(set(executed)))
        assert set(executed) == expected
    finally:
        recorder.delete(key)
        purge(app, bounded.effective_queue, unbounded.effective_queue)


#: the ready tasks three runners race for: several claim chunks each
#: (``CLAIM_CHUNK``), in the quick cut and the full one
RACED = scale(20_000, 50_000)


@pytest.mark.redis
def test_three_runners_dispatch_each_task_once(
    pg_store: SQLAlchemyStore, postgres_url: str
) -> None:
    app = make_test_app(services.redis_url())
    now = datetime.now(tz=UTC)
    task_type = new_type(pg_store, None)
    pg_store.import_tasks(ready_tasks(task_type, RACED, now), now=now, batch_size=5000)
    published: list[int] = [0, 0, 0]
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def runner(slot: int) -> None:
        store = SQLAlchemyStore.from_url(postgres_url)
        try:
            barrier.wait()
            while (report := tick(store, app, now)).claimed:
                published[slot] += report.published
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=runner, args=(n,)) for n in range(3)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert not errors
        assert sum(published) == RACED
        assert queue_depth(app, task_type.effective_queue) == RACED
        with pg_store.engine.connect() as conn:
            runs, distinct = conn.exec_driver_sql(
                "SELECT count(*), count(DISTINCT task_id) FROM task_run"
            ).one()
        assert runs == distinct == RACED
    finally:
        purge(app, task_type.effective_queue)


@pytest.mark.redis
def test_broker_down_claims_nothing_and_keeps_running(
    pg_store: SQLAlchemyStore, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_test_app("redis://127.0.0.1:1/0")
    now = datetime.now(tz=UTC)
    task_type = new_type(pg_store, 100)
    pg_store.import_tasks(ready_tasks(task_type, 10, now), now=now)
    with caplog.at_level(logging.ERROR):
        report = tick(pg_store, app, now)
    assert report.errors and report.claimed == 0
    assert "cannot read queue depths" in caplog.text
    assert len(pg_store.list_pending(task_type.type, now=now)) == 10


@pytest.mark.redis
def test_publish_failure_after_claim_leaves_runs_scheduled(
    pg_store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker dies between the claim and the publish (a real server is stopped)."""
    server = services.start_embedded_redis()
    app = make_test_app(server.url)
    now = datetime.now(tz=UTC)
    task_type = new_type(pg_store, 100)
    [created] = pg_store.create_tasks(list(ready_tasks(task_type, 1, now)), now=now)
    from swh_like_scheduler.broker.port import CeleryBroker

    class StopsBeforePublishing(CeleryBroker):
        def publish(self, messages):  # type: ignore[no-untyped-def]
            server.stop()
            return super().publish(messages)

    report = tick(pg_store, None, now, broker=StopsBeforePublishing(app))
    assert report.claimed == 1 and report.published == 0
    assert report.errors and "stay scheduled" in report.errors[0]
    [run] = pg_store.get_task_runs(created.id or 0)
    assert run.status is RunStatus.SCHEDULED and run.started is None
    assert pg_store.get_tasks([created.id or 0])[0].status is TaskStatus.SCHEDULED


@pytest.mark.redis
def test_a_failed_claim_of_a_round_still_publishes_the_others(
    pg_store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two claims at once; the second one's transaction fails (the database
    refuses it): the first chunk is published, the second stays waiting."""
    from swh_like_scheduler.domain.exceptions import StoreUnavailable

    app = make_test_app(services.redis_url())
    now = datetime.now(tz=UTC)
    task_type = new_type(pg_store, 10_000)
    pg_store.import_tasks(ready_tasks(task_type, 7000, now), now=now)
    first_ids = pg_store.ready_task_ids(task_type.type, now=now, limit=5000)
    real_claim = pg_store.claim_ready_tasks

    def claim(*args, among=None, **kwargs):  # type: ignore[no-untyped-def]
        if among is not None and among[0] not in first_ids:
            raise StoreUnavailable("claim ready tasks: the server closed the connection")
        return real_claim(*args, among=among, **kwargs)

    monkeypatch.setattr(pg_store, "claim_ready_tasks", claim)
    try:
        report = tick(pg_store, app, now)
        [done] = report.types
        assert (done.claimed, done.published) == (5000, 5000), done.describe()
        assert done.error and "claim failed" in done.error
        assert queue_depth(app, task_type.effective_queue) == 5000
        assert len(pg_store.list_pending(task_type.type, now=now, limit=10_000)) == 2000
    finally:
        purge(app, task_type.effective_queue)


@pytest.mark.redis
def test_database_down_the_loop_keeps_running() -> None:
    app = make_test_app(services.redis_url())
    store = SQLAlchemyStore.from_url("postgresql://x@127.0.0.1:1/x?connect_timeout=1")
    stop = threading.Event()
    reports = []

    def on_pass(report: object) -> None:
        reports.append(report)
        if len(reports) >= 3:
            stop.set()

    waker = waker_for(store.engine, stop)
    thread = threading.Thread(
        target=loop.run,
        args=(loop.RunnerLoop(store, app, period=0.1, on_pass=on_pass), waker),
        kwargs={"stop": stop},
    )
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len(reports) == 3 and all(r.errors for r in reports)
    store.close()


@pytest.mark.redis
def test_new_ready_task_wakes_the_runner(pg_store: SQLAlchemyStore) -> None:
    app = make_test_app(services.redis_url())
    task_type = new_type(pg_store, 100)
    stop = threading.Event()
    passes: list[object] = []
    waker = waker_for(pg_store.engine, stop)
    thread = threading.Thread(
        target=loop.run,
        args=(loop.RunnerLoop(pg_store, app, period=60, on_pass=passes.append), waker),
        kwargs={"stop": stop},
    )
    try:
        thread.start()
        wait_until(lambda: len(passes) >= 1, 10, "the first (idle) pass")
        now = datetime.now(tz=UTC)
        started = time.monotonic()
        [created] = pg_store.create_tasks(
            [
                Task(
                    type=task_type.type,
                    args=(1,),
                    next_run=now,
                    deadline=now,
                    priority=Priority.HIGH,
                )
            ],
            now=now,
        )
        wait_until(lambda: bool(pg_store.get_task_runs(created.id or 0)), 10, "the dispatch")
        assert time.monotonic() - started < 5, "woken by the notification, not the 60 s poll"
    finally:
        stop.set()
        thread.join(timeout=10)
        waker.close()
        purge(app, task_type.effective_queue)


@pytest.mark.redis
def test_an_outcome_that_makes_a_task_ready_soon_wakes_the_runner(
    pg_store: SQLAlchemyStore,
) -> None:
    """While its only task runs, a runner has nothing to wait for and sleeps
    its whole period (60 s); the outcome that reschedules the task 3 s later
    wakes it, so it sleeps until then and dispatches the task on time."""
    app = make_test_app(services.redis_url())
    task_type = new_type(pg_store, 100)
    stop = threading.Event()
    passes: list[object] = []
    waker = waker_for(pg_store.engine, stop)
    thread = threading.Thread(
        target=loop.run,
        args=(loop.RunnerLoop(pg_store, app, period=60, on_pass=passes.append), waker),
        kwargs={"stop": stop},
    )
    now = datetime.now(tz=UTC)
    [created] = pg_store.create_tasks(
        [
            Task(
                type=task_type.type,
                args=(1,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(seconds=3),
                next_run=now,
                deadline=now,
            )
        ],
        now=now,
    )
    try:
        thread.start()
        wait_until(lambda: bool(pg_store.get_task_runs(created.id or 0)), 10, "the dispatch")
        [run] = pg_store.get_task_runs(created.id or 0)
        apply = outcome_applier(TaskTypeCache(pg_store), random.Random(0))
        ended = datetime.now(tz=UTC)
        pg_store.end_task_run(
            run.backend_id,
            status=RunStatus.UNEVENTFUL,
            ended=ended,
            result={"status": "uneventful"},
            apply=apply,
        )
        [task] = pg_store.get_tasks([created.id or 0])
        assert task.status is TaskStatus.WAITING and task.next_run - ended < timedelta(minutes=1)
        wait_until(
            lambda: len(pg_store.get_task_runs(created.id or 0)) == 2,
            (task.next_run - datetime.now(tz=UTC)).total_seconds() + 5,
            "the second dispatch, at the task's next run rather than after the 60 s sleep",
        )
    finally:
        stop.set()
        thread.join(timeout=10)
        waker.close()
        purge(app, task_type.effective_queue)


@pytest.mark.redis
def test_the_runner_outlives_its_listen_connection(pg_store: SQLAlchemyStore) -> None:
    """The LISTEN connection is terminated by the server (as in a database
    restart): the runner's loop goes on, the waker connects again, and a
    task created afterwards still wakes it at once."""
    app = make_test_app(services.redis_url())
    task_type = new_type(pg_store, 100)
    stop = threading.Event()
    passes: list[object] = []
    errors: list[BaseException] = []
    waker = waker_for(pg_store.engine, stop)
    assert isinstance(waker, PostgresWaker)
    waker._retry = 0.2  # reconnect quickly in the test

    def run() -> None:
        try:
            steps = loop.RunnerLoop(pg_store, app, period=60, on_pass=passes.append)
            loop.run(steps, waker, stop=stop)
        except BaseException as error:  # the runner died: the test says so
            errors.append(error)

    thread = threading.Thread(target=run)
    try:
        thread.start()
        wait_until(lambda: len(passes) >= 1, 10, "the first (idle) pass")
        with pg_store.engine.connect() as conn:
            killed = conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE starts_with(query, 'LISTEN ') AND pid <> pg_backend_pid()"
            ).all()
        assert killed and all(row[0] for row in killed)
        # the loss is noticed, the waker connects again and wakes a pass
        wait_until(lambda: len(passes) >= 2 or errors, 15, "a pass after the reconnection")
        assert not errors and thread.is_alive()
        count = len(passes)
        now = datetime.now(tz=UTC)
        started = time.monotonic()
        [created] = pg_store.create_tasks(
            [Task(type=task_type.type, args=(2,), next_run=now, deadline=now)], now=now
        )
        wait_until(lambda: bool(pg_store.get_task_runs(created.id or 0)), 10, "the dispatch")
        assert time.monotonic() - started < 5, "woken by the notification, not the 60 s poll"
        # (the runs are visible before the pass that made them returns)
        wait_until(lambda: len(passes) > count, 10, "the pass that dispatched it to return")
        assert not errors
    finally:
        stop.set()
        thread.join(timeout=10)
        waker.close()
        purge(app, task_type.effective_queue)


@pytest.mark.parametrize(
    ("kind", "claimers"),
    [
        pytest.param("redis", 1, marks=pytest.mark.redis),
        pytest.param("redis", 3, marks=pytest.mark.redis),
        pytest.param("rabbitmq", 2, marks=pytest.mark.rabbitmq),
    ],
)
def test_concurrent_claims_keep_the_dispatch_order_in_the_queue(
    pg_store: SQLAlchemyStore, postgres_url: str, kind: str, claimers: int
) -> None:
    """12,000 tasks: one claim at a time, or chunks claimed at once; either
    way the queue holds them in deadline order, each once."""
    broker_url = services.redis_url() if kind == "redis" else services.amqp_url()
    app = make_test_app(broker_url)
    task_type = new_type(pg_store, 12_000)  # a pass without a bound stops at 10,000
    now = datetime.now(tz=UTC)
    pg_store.import_tasks(ready_tasks(task_type, 12_000, now), now=now)
    queue = task_type.effective_queue
    try:
        command = ["scheduler", "--db-url", postgres_url, "start-runner", "--once"]
        options = ["--claimers", str(claimers), "--broker-url", broker_url, "--no-monitor"]
        # (named, whatever the default: the test reads the deadlines back;
        # the other orders' chunks are checked in the store's contract tests)
        options += ["--dispatch-order", "deadline"]
        result = CliRunner().invoke(swh, [*command, *options])
        assert result.exit_code == 0, result.output
        with pg_store.engine.connect() as conn:
            deadlines = dict(
                conn.exec_driver_sql(
                    "SELECT r.backend_id, t.deadline FROM task_run r JOIN task t"
                    " ON t.id = r.task_id WHERE t.type = %(type)s",
                    {"type": task_type.type},
                ).all()
            )
        ids = _queued_ids(app, queue, broker_url, 12_000)
        assert len(ids) == len(set(ids)) == len(deadlines) == 12_000
        order = [deadlines[i] for i in ids]
        assert order == sorted(order)
    finally:
        purge(app, queue)


def _queued_ids(app: Celery, queue: str, broker_url: str, count: int) -> list[str]:
    """The task ids in ``queue``, in the order a worker receives them."""
    if broker_url.startswith("redis"):
        client = redis.Redis.from_url(broker_url)
        # kombu pushes on the left and workers pop on the right
        return [json.loads(e)["headers"]["id"] for e in reversed(client.lrange(queue, 0, -1))]
    wait_until(lambda: queue_depth(app, queue) == count, 15, f"{count} messages counted")
    ids = []
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        while (message := channel.basic_get(queue, no_ack=True)) is not None:
            ids.append(message.headers["id"])
    return ids


def test_claimers_option_is_checked_and_its_default_documented(postgres_url: str) -> None:
    from swh_like_scheduler.dispatch.serve import CLAIMERS

    command = ["scheduler", "--db-url", postgres_url, "start-runner"]
    refused = CliRunner().invoke(swh, [*command, "--once", "--claimers", "0"])
    assert refused.exit_code == 2 and "--claimers" in refused.output
    help_text = CliRunner().invoke(swh, [*command, "--help"]).output
    assert f"Default: {CLAIMERS}." in " ".join(help_text.split())


@pytest.mark.redis
def test_runs_are_stamped_when_their_chunk_is_claimed_not_when_the_pass_began(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long pass (each claim slowed down by half a second, chunks of 2):
    the runs of the last chunk are stamped about a second after the first
    ones, so re-publishing waits from when they really went out."""
    from swh_like_scheduler.dispatch import serve as dispatch

    class SlowClaims(SQLAlchemyStore):
        def claim_ready_tasks(self, *args: object, **kwargs: object) -> list:  # type: ignore[override]
            time.sleep(0.5)  # a loaded database
            return super().claim_ready_tasks(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dispatch, "CLAIM_CHUNK", 2)
    app = make_test_app(services.redis_url())
    store = SlowClaims.from_url(postgres_url)
    task_type = new_type(store, 100)
    now = datetime.now(tz=UTC)
    created = store.create_tasks(list(ready_tasks(task_type, 6, now)), now=now)
    try:
        report = tick(store, app, now, claimers=1)
        assert report.published == 6
        stamps = sorted(store.get_task_runs(t.id or 0)[0].scheduled for t in created)
        assert stamps[0] >= now
        assert stamps[-1] - stamps[0] >= timedelta(seconds=0.9)
    finally:
        store.close()
        purge(app, task_type.effective_queue)


@pytest.mark.redis
def test_a_claimed_chunk_is_published_before_the_rest_of_its_round_is_claimed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two claimers, chunks of 2: the second claim of the round waits until
    the first chunk's messages are on the broker (at most 5 s), which they
    are without it, since each chunk is handed to the publishing thread as
    soon as it is claimed."""
    from swh_like_scheduler.dispatch import serve as dispatch

    app = make_test_app(services.redis_url())
    seen: list[int] = []

    class SlowSecondClaim(SQLAlchemyStore):
        def claim_ready_tasks(self, *args: object, **kwargs: object) -> list:  # type: ignore[override]
            if threading.current_thread().name.startswith("claim"):
                queue = task_type.effective_queue
                deadline = time.monotonic() + 5
                while queue_depth(app, queue) < 2 and time.monotonic() < deadline:
                    time.sleep(0.02)
                seen.append(queue_depth(app, queue))
            return super().claim_ready_tasks(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dispatch, "CLAIM_CHUNK", 2)
    store = SlowSecondClaim.from_url(postgres_url)
    task_type = new_type(store, 100)
    now = datetime.now(tz=UTC)
    store.create_tasks(list(ready_tasks(task_type, 4, now)), now=now)
    try:
        report = tick(store, app, now, claimers=2)
        assert report.published == 4 and not report.errors
        assert seen == [2]
    finally:
        store.close()
        purge(app, task_type.effective_queue)


@pytest.mark.redis
def test_a_claim_past_its_time_limit_writes_nothing_and_the_next_is_smaller(
    pg_store: SQLAlchemyStore,
) -> None:
    """PostgreSQL cancels a claim that runs past ``claim_timeout``: nothing
    is claimed, the pass says why, and that type's next claims are halved;
    full claims then grow them back."""
    from swh_like_scheduler.dispatch import serve as dispatch
    from swh_like_scheduler.domain.exceptions import StatementTimeout

    app = make_test_app(services.redis_url())
    task_type = new_type(pg_store, 20_000)
    now = datetime.now(tz=UTC)
    pg_store.import_tasks(ready_tasks(task_type, 12_000, now), now=now)
    pg_store.claim_timeout = timedelta(microseconds=1000)  # 1 ms: any claim of thousands
    try:
        with pytest.raises(StatementTimeout, match="time limit"):
            pg_store.claim_ready_tasks(task_type.type, now=now, limit=5000)
        assert pg_store.count_tasks(TaskFilter(status=[TaskStatus.SCHEDULED])) == 0
        report = tick(pg_store, app, now, claimers=1)
        assert report.published == 0 and "time limit" in report.errors[0]
        assert dispatch.CHUNKS.get(task_type.type) == dispatch.CLAIM_CHUNK // 2
        pg_store.claim_timeout = None
        report = tick(pg_store, app, now, claimers=1)
        assert report.published == 12_000 and not report.errors
        assert dispatch.CHUNKS.get(task_type.type) == dispatch.CLAIM_CHUNK
    finally:
        purge(app, task_type.effective_queue)
