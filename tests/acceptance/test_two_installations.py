"""Two installations (two databases) on one RabbitMQ vhost, each with its
runner, listener and worker, all started from the installed entry points
with the defaults (the listener's event queue included), their tasks of
the same ids at the same instants (so their runs would share Celery ids if
ids were derived from the task and the slot alone).

Counted from the work itself: every body publishes a message to its
installation's own queue, with its run's Celery id. 0 stuck runs, 0 run
ends dropped, every message a run of its own installation, recorded there.
On main, both listeners read the one default queue: each took about half
of the other's events, dropped them as unknown runs, and the runs whose
end went to the wrong listener stayed started."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import services
from standalone_run import swh_executable, wait_for

from swh_like_scheduler.domain.model import (
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.listener import event_queue_name
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore, migrations

pytestmark = [pytest.mark.acceptance, pytest.mark.rabbitmq]

ROOT = Path(__file__).parents[2]  # celeryconfig.py
NOTIFY = "swh_like_workers.notify.notify"
TASKS = 20


class Installation:
    """One database and its daemons on the shared broker."""

    def __init__(self, name: str, folder: Path, broker: str, tag: str) -> None:
        self.name = name
        folder.mkdir()
        self.folder = folder
        self.db_url = f"sqlite:///{folder / 'scheduler.sqlite'}"
        self.store = SQLAlchemyStore.from_url(self.db_url)
        migrations.upgrade(self.store.engine)
        self.broker = broker
        self.queue = f"swh-test-{tag}-{name}-tasks"
        self.out = f"swh-test-{tag}-{name}-out"
        self.worker_name = f"notify-{tag}-{name}@%h"
        self.processes: list[subprocess.Popen[bytes]] = []

    def tasks(self, at: datetime) -> None:
        self.store.create_task_type(
            TaskType(
                type="notify",
                backend_name=NOTIFY,
                queue=self.queue,
                default_interval=timedelta(hours=1),
                num_retries=0,
            )
        )
        self.store.create_tasks(
            [
                Task(
                    type="notify",
                    schedule_kind=ScheduleKind.ONESHOT,
                    kwargs={"queue": self.out, "payload": {"installation": self.name, "n": n}},
                    next_run=at,
                    deadline=at,
                )
                for n in range(TASKS)
            ],
            now=at,
        )

    def spawn(self, what: str, argv: list[str]) -> None:
        env = {
            **os.environ,
            "SWH_SCHEDULER_DB_URL": self.db_url,
            "SWH_SCHEDULER_BROKER_URL": self.broker,
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("SWH_SCHEDULER_RESULT_BACKEND", None)
        with open(self.folder / f"{what}.log", "ab") as log:
            self.processes.append(
                subprocess.Popen(
                    argv, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )  # fmt: skip

    def start(self) -> None:
        swh = [swh_executable(), "scheduler"]
        # the listener's queue is left to its default: the point of the test
        self.spawn("listener", [*swh, "start-listener", "--summary-every", "2"])
        self.spawn(
            "worker",
            [
                *(sys.executable, "-m", "celery", "-A", "swh_like_scheduler.celery_app"),
                *("worker", "-Q", self.queue, "-n", self.worker_name, "-E"),
                *("-P", "threads", "-c", "2", "--without-gossip", "--without-mingle"),
                *("--loglevel", "WARNING"),
            ],
        )
        self.spawn("runner", [*swh, "start-runner", "--period", "1"])

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
                process.wait()
        self.store.close()

    def runs(self) -> list[TaskRun]:
        return [r for t in self.store.get_tasks(list(range(1, TASKS + 1))) for r in
                self.store.get_task_runs(t.id or 0)]  # fmt: skip

    def log(self, what: str) -> str:
        return (self.folder / f"{what}.log").read_text(errors="replace")


def drain(app: object, queue: str) -> list[tuple[dict[str, object], str]]:
    """Every message in ``queue`` (taken off it): its payload and the run id it names."""
    found = []
    with app.connection_for_write() as conn:  # type: ignore[attr-defined]
        channel = conn.default_channel
        while True:
            message = channel.basic_get(queue, no_ack=True)
            if message is None:
                return found
            headers = message.properties["application_headers"]
            found.append((json.loads(message.body), headers["swh-task-id"]))


@pytest.fixture
def broker() -> str:
    return services.amqp_url()


@pytest.fixture
def installations(tmp_path: Path, broker: str) -> Iterator[tuple[Installation, Installation]]:
    tag = uuid.uuid4().hex[:8]
    pair = (
        Installation("a", tmp_path / "a", broker, tag),
        Installation("b", tmp_path / "b", broker, tag),
    )
    try:
        yield pair
    finally:
        for one in pair:
            one.stop()
        app = make_app(config_module=None, broker_url=broker, load_workers=False)
        with app.connection_for_write() as conn:
            channel = conn.channel()
            for one in pair:
                names = [one.queue, one.out, event_queue_name(one.store.installation_id())]
                for name in names:
                    with contextlib.suppress(Exception):
                        channel.queue_delete(name)
                    if not channel.is_open:
                        channel = conn.channel()


@pytest.mark.timeout(240)
def test_two_installations_on_one_vhost_keep_their_runs_apart(
    installations: tuple[Installation, Installation], broker: str
) -> None:
    a, b = installations
    assert a.store.installation_id() != b.store.installation_id()
    at = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
    for one in (a, b):
        one.tasks(at)  # the same task ids, the same instants
    for one in (a, b):
        one.start()

    def all_ended() -> bool:
        return all(
            len(one.runs()) == TASKS and not any(r.status.is_open for r in one.runs())
            for one in (a, b)
        )

    wait_for(all_ended, 150, "every run of both installations to end")
    app = make_app(config_module=None, broker_url=broker, load_workers=False)
    for one, other in ((a, b), (b, a)):
        runs = one.runs()
        assert [r.status for r in runs] == [RunStatus.EVENTFUL] * TASKS, runs
        statuses = {t.status for t in one.store.get_tasks(list(range(1, TASKS + 1)))}
        assert statuses == {TaskStatus.COMPLETED}
        # the work: one message per task, each naming a run of this installation
        published = drain(app, one.out)
        assert sorted(p["n"] for p, _ in published) == list(range(TASKS))  # type: ignore[type-var]
        assert {p["installation"] for p, _ in published} == {one.name}
        assert {run_id for _, run_id in published} == {r.backend_id for r in runs}
        assert not {run_id for _, run_id in published} & {r.backend_id for r in other.runs()}
    for one in (a, b):
        listener = one.log("listener")
        queue = event_queue_name(one.store.installation_id())
        assert f"queue {queue}" in listener, listener
        # it saw the other installation's events, and let them be (said by
        # its summary line, every 2 s)
        said = functools.partial(lambda it: "unknown_run" in it.log("listener"), one)
        wait_for(said, 30, "the listener's summary")
