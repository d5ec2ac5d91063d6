"""Catch-up after downtime: a runner that did not pass for hours runs a
``latest`` task once and drops the missed firings of a ``skip`` task,
recording them as one skipped run (SQLite and PostgreSQL, Redis broker)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import services
from runnertest import make_test_app
from waiting import delete_queues as purge
from waiting import wait_until

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import RunStatus, Task, TaskRun, TaskType
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.policy import Condition, condition
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.redis]

MIN = timedelta(minutes=1)
T0 = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)


def _type(store: SQLAlchemyStore, catch_up: str, grace: timedelta) -> TaskType:
    name = f"c{uuid.uuid4().hex[:8]}"
    return store.create_task_type(
        TaskType(
            type=name,
            backend_name="tests.runner.record",
            queue=f"swh-test-{name}",
            catch_up=catch_up,
            catch_up_grace=grace,
        )
    )


def _tasks(store: SQLAlchemyStore, task_type: TaskType, now: datetime) -> tuple[Task, Task]:
    cron = task_from_input(
        {"kind": "cron", "cron": "0 * * * *", "cron_max_duration": "30m"}, task_type, now=now
    )
    periodic = task_from_input(
        {"kind": "periodic", "period": "1h", "cooldown": "50m"}, task_type, now=now
    )
    made = store.create_tasks([cron, periodic], now=now)
    return made[0], made[1]


def _runs(store: SQLAlchemyStore, task: Task) -> list[TaskRun]:
    assert task.id is not None
    return list(reversed(store.get_task_runs(task.id, limit=100)))


class Platform:
    """The runner's passes at instants the test chooses; the runs it
    dispatches end (eventful) a minute after they were claimed, recorded
    through the listener's outcome applier."""

    def __init__(self, store: SQLAlchemyStore, types: list[TaskType], tasks: list[Task]) -> None:
        self.store, self.types, self.tasks = store, types, tasks
        self.app = make_test_app(services.redis_url())
        self.apply = outcome_applier(TaskTypeCache(store), random.Random(1))

    def serve(self, now: datetime) -> int:
        """One runner pass at ``now``; returns the runs it claimed."""
        report = tick(self.store, self.app, now, types=[t.type for t in self.types])
        assert not report.errors, report.errors
        for task in self.tasks:
            for run in _runs(self.store, task):
                if run.status.is_open:
                    self.store.end_task_run(
                        run.backend_id,
                        status=RunStatus.EVENTFUL,
                        ended=now + MIN,
                        apply=self.apply,
                    )
        return report.claimed

    def close(self) -> None:
        purge(self.app, *(t.effective_queue for t in self.types))


@pytest.fixture
def platform_parts(store: SQLAlchemyStore) -> Iterator[tuple[SQLAlchemyStore, dict[str, Task]]]:
    latest = _type(store, "latest", 10 * MIN)
    skip = _type(store, "skip", 10 * MIN)
    tasks: dict[str, Task] = {}
    for label, task_type in (("latest", latest), ("skip", skip)):
        cron, periodic = _tasks(store, task_type, T0)
        tasks[f"{label}-cron"], tasks[f"{label}-periodic"] = cron, periodic
    platform = Platform(store, [latest, skip], list(tasks.values()))
    store.platform = platform  # type: ignore[attr-defined]
    yield store, tasks
    platform.close()


def test_six_hours_down_latest_runs_once_and_skip_records_the_missed_firings(
    platform_parts: tuple[SQLAlchemyStore, dict[str, Task]],
) -> None:
    store, tasks = platform_parts
    platform: Platform = store.platform  # type: ignore[attr-defined]
    hour = timedelta(hours=1)
    # before the outage the runner serves every firing on time
    assert platform.serve(T0 + hour + 30 * timedelta(seconds=1)) == 4  # 01:00:30
    assert platform.serve(T0 + 2 * hour + 40 * timedelta(seconds=1)) == 4  # 02:00:40
    before = {label: len(_runs(store, task)) for label, task in tasks.items()}
    assert before == dict.fromkeys(tasks, 2)

    # the runner is stopped for six hours: firings 03:00 .. 08:00 are missed
    restart = T0 + 8 * hour + 30 * MIN
    assert platform.serve(restart) == 2  # the two "latest" tasks, once each
    assert platform.serve(restart + MIN) == 0  # and only once
    after = {label: _runs(store, task)[before[label] :] for label, task in tasks.items()}
    for label in ("latest-cron", "latest-periodic"):
        [run] = after[label]
        assert run.status is RunStatus.EVENTFUL and restart <= run.scheduled < restart + MIN
        assert run.slot < restart - 10 * MIN  # the late firing, run once
    for label in ("skip-cron", "skip-periodic"):
        [run] = after[label]  # one record for the whole stretch
        assert run.status is RunStatus.SKIPPED and run.started is None
        assert run.error is not None and run.error.startswith("skipped: 6 firings from ")
        assert "catch-up grace of 10m" in run.error
        assert run.history[0]["count"] == 6
    assert "2026-03-02T03:00:00+00:00" in after["skip-cron"][0].error  # type: ignore[operator]
    assert "next firing is at 2026-03-02T09:00:00+00:00" in after["skip-cron"][0].error  # type: ignore[operator]
    assert "next firing is at 2026-03-02T09:01:40+00:00" in after["skip-periodic"][0].error  # type: ignore[operator]

    # a skipped firing is not a failure: the skipped tasks are OK, waiting
    for label in ("skip-cron", "skip-periodic"):
        [task] = store.get_tasks([tasks[label].id or 0])
        task_type = store.get_task_type(task.type)
        assert task_type is not None
        assert task.failure_count == 0
        assert condition(task, task_type, restart + MIN).level is Condition.OK

    # (no worker reports a start: a run counts from its end, 02:01:40, so
    # the periodic task was due at 03:01:40, 04:01:40 ...)
    # the next firings run as usual: cron at 09:00 for both, the skipped
    # periodic task at the firing it resumed at (09:01:40); the periodic
    # task that ran late (ended 08:31) waits for its cooldown (09:21)
    assert platform.serve(T0 + 9 * hour + 110 * timedelta(seconds=1)) == 3
    final = {label: _runs(store, task)[-1] for label, task in tasks.items()}
    assert restart <= final["latest-periodic"].scheduled < restart + MIN
    for label in ("latest-cron", "skip-cron", "skip-periodic"):
        assert final[label].status is RunStatus.EVENTFUL
    skipped = [r for t in tasks.values() for r in _runs(store, t) if r.status is RunStatus.SKIPPED]
    assert len(skipped) == 2


def test_a_real_runner_stopped_and_restarted_skips_what_it_missed(
    sqlite_url: str, tmp_path: Path
) -> None:
    """``start-runner`` as a process over a periodic task of period 2 s and
    grace 1 s: stopped for several periods, restarted, it records the missed
    stretch once and runs again from the next firing; a ``latest`` twin runs
    at once. The test records the runs' ends (in place of workers and a
    listener) as soon as they are claimed."""
    store = SQLAlchemyStore.from_url(sqlite_url)
    second = timedelta(seconds=1)
    latest = _type(store, "latest", second)
    skip = _type(store, "skip", second)
    now = datetime.now(tz=UTC)
    made = {
        t.type: store.create_tasks(
            [task_from_input({"kind": "periodic", "period": "2s", "cooldown": "1s"}, t, now=now)],
            now=now,
        )[0]
        for t in (latest, skip)
    }
    apply = outcome_applier(TaskTypeCache(store), random.Random(1))

    def finish_open_runs() -> None:
        for task in made.values():
            for run in _runs(store, task):
                if run.status.is_open:
                    store.end_task_run(
                        run.backend_id,
                        status=RunStatus.EVENTFUL,
                        ended=datetime.now(tz=UTC),
                        apply=apply,
                    )

    def good_runs(task_type: TaskType) -> int:
        finish_open_runs()
        return sum(r.status is RunStatus.EVENTFUL for r in _runs(store, made[task_type.type]))

    swh = str(Path(sys.executable).with_name("swh"))
    command = [
        swh,
        "scheduler",
        "--db-url",
        sqlite_url,
        "start-runner",
        "--broker-url",
        services.redis_url(),
        "--period",
        "0.2",
        "-t",
        latest.type,
        "-t",
        skip.type,
    ]
    log = tmp_path / "runner.log"
    app = make_test_app(services.redis_url())

    def start() -> subprocess.Popen[bytes]:
        with log.open("a") as out:
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def stop(process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)

    runner = start()
    try:
        wait_until(lambda: good_runs(skip) >= 2 and good_runs(latest) >= 2, 60, "runs on time")
        stop(runner)
        finish_open_runs()
        [task] = store.get_tasks([made[skip.type].id or 0])
        # down for at least three periods after the task was due
        wait_until(
            lambda: datetime.now(tz=UTC) > task.deadline + 7 * second, 30, "an outage of 6 s"
        )
        skipped_before = len(_runs(store, task))
        latest_before = good_runs(latest)
        restarted = datetime.now(tz=UTC)
        runner = start()
        wait_until(
            lambda: any(r.status is RunStatus.SKIPPED for r in _runs(store, task)),
            60,
            "the missed firings skipped",
        )
        wait_until(lambda: good_runs(latest) > latest_before, 60, "the latest task run")
        wait_until(lambda: good_runs(skip) > 2, 60, "the skip task runs again")
    finally:
        stop(runner)
        purge(app, latest.effective_queue, skip.effective_queue)
    runs = _runs(store, task)[skipped_before - 1 :]
    skipped = [r for r in runs if r.status is RunStatus.SKIPPED]
    assert len(skipped) == 1, [(r.status, r.slot) for r in runs]
    [record] = skipped
    assert record.error is not None and "catch-up grace of 1s" in record.error
    resume = datetime.fromisoformat(record.history[0]["resume_at"])
    later = [r for r in runs if r.scheduled > record.scheduled]
    assert later and all(r.slot >= resume for r in later)
    assert record.scheduled >= restarted
    # the latest twin ran its late firing at once, without any skip
    latest_runs = _runs(store, made[latest.type])
    assert not any(r.status is RunStatus.SKIPPED for r in latest_runs)
    assert any(r.scheduled >= restarted for r in latest_runs)
    store.close()
