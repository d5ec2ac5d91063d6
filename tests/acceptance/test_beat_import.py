"""A Celery beat user's ``beat_schedule`` imported, then run by ``celery beat -S swh``.

The app is :mod:`beatapp` (a timedelta of 5 s and a crontab every minute);
the ground truth is the file its task appends to, one line per execution.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import services
from waiting import delete_queues, patience, wait_until

from swh_like_scheduler.domain.model import RunStatus, TaskStatus, TaskType
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.acceptance, pytest.mark.redis]

HERE = Path(__file__).parent
SWH = str(Path(sys.executable).with_name("swh"))
CELERY = str(Path(sys.executable).with_name("celery"))
PERIOD = 5.0
#: how late a firing may start (dispatch, the worker's pickup, a loaded machine)
LATE = 3.0


class Processes:
    """Named subprocesses, each in its own session, logging to ``logs``."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.env = logs, env
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *command: str) -> None:
        with (self.logs / f"{name}.log").open("ab") as log:
            self.running[name] = subprocess.Popen(
                command,
                cwd=self.logs,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def stop(self, name: str, timeout: float = 30) -> int:
        process = self.running[name]
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        return process.returncode

    def check_alive(self) -> None:
        for name, process in self.running.items():
            assert process.poll() is None, f"{name} exited:\n{self.log(name)[-3000:]}"

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name)


@pytest.fixture
def beat_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    broker = services.require("redis", services.redis_url)
    queue = f"swh-test-beatimport-{uuid.uuid4().hex[:8]}"
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    yield {
        **os.environ,
        "PYTHONPATH": path,
        "BEATAPP_BROKER": broker,
        "BEATAPP_QUEUE": queue,
        "BEATAPP_OUT": str(tmp_path / "ticks.txt"),
        "SWH_SCHEDULER_BROKER_URL": broker,
    }
    delete_queues(make_app(config_module=None, broker_url=broker, load_workers=False), queue)


def import_beat(env: dict[str, str], *options: str) -> str:
    done = subprocess.run(
        [SWH, "scheduler", "import-beat", "--app", "beatapp:app", *options],
        cwd=env["BEATAPP_OUT"].rpartition("/")[0],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def ticks(env: dict[str, str], label: str) -> list[float]:
    """When each execution of the entry ``label`` began (Unix time)."""
    out = Path(env["BEATAPP_OUT"])
    lines = out.read_text().splitlines() if out.exists() else []
    return [float(line.split()[1]) for line in lines if line.split()[0] == label]


@pytest.mark.postgresql
def test_an_imported_beat_schedule_fires_on_time_once_under_celery_beat(
    postgres_url: str, tmp_path: Path, beat_env: dict[str, str]
) -> None:
    env = {**beat_env, "SWH_SCHEDULER_DB_URL": postgres_url}
    imported = import_beat(env, "--create-types")
    assert imported.splitlines()[-1] == (
        "2 beat_schedule entries: 2 created; 1 task type(s) created"
    )
    store = SQLAlchemyStore.from_url(postgres_url)
    processes = Processes(tmp_path, env)
    try:
        tasks = {t.key: t for t in store.search_tasks()}
        periodic, cron = tasks["beat:every-5s"], tasks["beat:every-minute"]
        worker = f"beatimport-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
        processes.start(
            "worker",
            CELERY,
            "-A",
            "beatapp",
            "worker",
            "-P",
            "solo",
            "-E",
            "-Q",
            env["BEATAPP_QUEUE"],
            "-n",
            worker,
            "--without-gossip",
            "--without-mingle",
            "-l",
            "WARNING",
        )
        processes.start(
            "listener",
            SWH,
            "scheduler",
            "start-listener",
            "--queue-name",
            f"celeryev.{env['BEATAPP_QUEUE']}",
        )
        # beat's timing is what is measured, not the worker's start: beat
        # starts once the worker answers, and its first firings are bounded
        # from when it has read its schedule (a loaded machine may start it
        # after the first written time: a catch-up firing, not a late one)
        control = make_app(config_module=None, broker_url=env["BEATAPP_BROKER"], load_workers=False)

        def worker_answers() -> bool:
            processes.check_alive()
            return bool(control.control.ping([worker], timeout=0.5))

        wait_until(worker_answers, 60, "the worker's remote control")
        beat = ("beat", "-S", "swh", "-l", "INFO", "--max-interval", "1")
        processes.start("beat", CELERY, "-A", "beatapp", *beat)

        def beat_ready() -> bool:
            processes.check_alive()
            return "beat_schedule: 2 beat_schedule entries" in processes.log("beat")

        wait_until(beat_ready, 60, "beat reading its schedule")
        ready = time.time()

        def cron_fired() -> bool:
            processes.check_alive()
            return bool(ticks(env, "every-minute"))

        # the crontab fires at the next minute (which may come seconds after
        # the import); then two more periods of the timedelta, and at least
        # five firings of it in all (four gaps to check)
        wait_until(cron_fired, 60 + 30, "the crontab entry's first firing")
        wanted = max(len(ticks(env, "every-5s")) + 2, 5)
        wait_until(lambda: len(ticks(env, "every-5s")) >= wanted, 7 * PERIOD, f"{wanted} firings")
        assert processes.stop("beat") == 0
        beat_log = processes.log("beat")

        def settled() -> bool:  # every run dispatched has ended and been recorded
            now = store.get_tasks([periodic.id or 0, cron.id or 0])
            return all(t.status is TaskStatus.WAITING for t in now)

        wait_until(settled, 30, "the last runs recorded")
        every_5s, every_minute = ticks(env, "every-5s"), ticks(env, "every-minute")
        # each run of each task is one execution of its body, and the reverse
        for task, executions in ((periodic, every_5s), (cron, every_minute)):
            runs = store.get_task_runs(task.id or 0, limit=1000)
            assert [r.status for r in runs] == [RunStatus.UNEVENTFUL] * len(executions)
    finally:
        processes.stop_all()
    # the crontab: once, at its minute (later on a loaded machine: the
    # dispatch and the worker's pickup wait for a core)
    late = LATE * patience()
    assert len(every_minute) == 1, every_minute
    due = cron.next_run.timestamp()
    assert due <= every_minute[0] <= max(due, ready) + late, (due, ready, every_minute)
    # the timedelta: first one period after the import, then once per period
    due = periodic.next_run.timestamp()
    assert due <= every_5s[0] <= max(due, ready) + late, (due, ready, every_5s)
    gaps = [b - a for a, b in itertools.pairwise(every_5s)]
    assert len(gaps) >= 4, every_5s
    assert all(0.9 * PERIOD - 0.1 <= gap <= PERIOD + late for gap in gaps), gaps
    # beat's own import at start found the entries as imported
    assert "beat_schedule: entry 'every-5s': unchanged" in beat_log, beat_log[-3000:]
    assert "beat_schedule: 2 beat_schedule entries: 2 unchanged" in beat_log

    # a second import changes nothing: same output, same rows
    before = store.search_tasks()
    again = import_beat(env)
    assert again.splitlines()[-1] == "2 beat_schedule entries: 2 unchanged"
    assert store.search_tasks() == before
    assert len(store.get_task_types()) == 1
    store.close()


def test_beat_refuses_to_start_when_told_not_to_import_naming_the_entries(
    sqlite_url: str, tmp_path: Path, beat_env: dict[str, str]
) -> None:
    env = {**beat_env, "SWH_SCHEDULER_DB_URL": sqlite_url, "BEATAPP_IMPORT": "0"}
    processes = Processes(tmp_path, env)
    processes.start("beat", CELERY, "-A", "beatapp", "beat", "-S", "swh", "-l", "INFO")
    try:
        processes.running["beat"].wait(60)
    finally:
        processes.stop_all()
    log = processes.log("beat")
    assert processes.running["beat"].returncode == 1, log
    assert (
        "beat -S swh cannot start: beat_schedule: beat_schedule has 2 entries "
        "('every-5s', 'every-minute') but swh_scheduler_import_beat_schedule is False"
    ) in log
    assert "Traceback" not in log
    # and with 'check', it refuses while they are not imported
    store = SQLAlchemyStore.from_url(sqlite_url)
    store.create_task_type(
        TaskType(type="tick", backend_name="beatapp.tick", queue=env["BEATAPP_QUEUE"])
    )
    env["BEATAPP_IMPORT"] = "check"
    processes.start("check", CELERY, "-A", "beatapp", "beat", "-S", "swh", "-l", "INFO")
    processes.running["check"].wait(60)
    assert "the entries 'every-5s' (not imported), 'every-minute' (not imported)" in (
        processes.log("check")
    )
    assert processes.running["check"].returncode == 1
    assert store.search_tasks() == []  # nothing written
    # imported, they pass the check: beat starts
    assert import_beat(env).splitlines()[-1] == "2 beat_schedule entries: 2 created"
    processes.start("checked", CELERY, "-A", "beatapp", "beat", "-S", "swh", "-l", "INFO")
    try:
        wait_until(
            lambda: (
                "beat_schedule checked: Dry run, nothing written: 2 beat_schedule entries: "
                "2 unchanged" in processes.log("checked")
            ),
            60,
            "beat's check",
        )
        assert processes.running["checked"].poll() is None  # started, ticking
    finally:
        processes.stop_all()
    store.close()
