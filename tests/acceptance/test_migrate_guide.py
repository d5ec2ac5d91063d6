"""The migrate-from-beat guide, followed literally by a Celery user with an
app of their own.

The app is the test's: ``proj/celery.py`` in a folder of its own, on a
private Redis (not the machine's, on 6379: a command that fell back on the
built-in broker would send its messages where no worker listens), naming an
empty PostgreSQL database (``swh_scheduler_db_url``), with a crontab every
minute and two timedeltas whose tasks are plain ``@shared_task`` functions.
Each body appends its entry and its Celery task id to a file: what really
ran. The guide's ``sh`` block is run as written (``swh`` and ``celery`` are
this environment's), from that folder, with no ``SWH_SCHEDULER_*`` variable
and data and configuration folders of its own; its worker is started
without ``-E``, as the guide says.

Then, on another app's folder, a worker whose remote control is off (its
task events cannot be turned on): it is named in a warning, and a run it
took is not published again while it lives, although beat's monitor
re-publishes lost messages after 30 s here (the default is 5 minutes)."""

from __future__ import annotations

import collections
import itertools
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import services
from test_beat_import import Processes
from waiting import patience, wait_until

from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.acceptance, pytest.mark.redis, pytest.mark.postgresql]

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "howto" / "migrate-from-beat.md"
BIN = Path(sys.executable).parent
#: how long the monitor in beat waits before it sends a lost message again
REPUBLISH_AFTER = 30

APP = textwrap.dedent(
    f"""
    import os
    import time
    from datetime import timedelta

    from celery import Celery, shared_task
    from celery.schedules import crontab

    app = Celery("proj", broker=os.environ["PROJ_BROKER"])
    app.conf.update(
        swh_scheduler_db_url=os.environ["PROJ_DB"],
        timezone="Europe/Paris",
        worker_enable_remote_control=os.environ.get("PROJ_REMOTE_CONTROL", "1") == "1",
        swh_scheduler_monitor={{"republish_after": {REPUBLISH_AFTER}, "period": 1}},
        beat_schedule={{
            "every-minute": {{"task": "proj.tasks.note", "schedule": crontab(), "args": ("cron",)}},
            "every-5s": {{"task": "proj.tasks.note", "schedule": timedelta(seconds=5),
                          "args": ("5s",)}},
            "every-7s": {{"task": "proj.tasks.other", "schedule": 7.0}},
        }},
    )


    def _note(label, task_id):
        with open(os.environ["PROJ_OUT"], "a") as out:
            out.write(f"{{label}} {{task_id}} {{time.time():.3f}}\\n")


    @shared_task(bind=True, name="proj.tasks.note")
    def note(self, label):
        _note(label, self.request.id)


    @shared_task(bind=True, name="proj.tasks.other")
    def other(self):
        _note("7s", self.request.id)
    """
)


def guide_commands() -> list[str]:
    """The command lines of the guide's ``from-your-app`` block, as written."""
    text = GUIDE.read_text()
    block = re.search(r"<!-- guide: from-your-app -->\n```sh\n(.*?)```", text, re.S)
    assert block is not None, "the guide's from-your-app block is gone"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def argv(line: str) -> list[str]:
    """A guide line's words, its program taken from this environment."""
    words = shlex.split(line)
    return [str(BIN / words[0]), *words[1:]]


def bodies(out: Path) -> list[tuple[str, str, float]]:
    """``(label, Celery id, when)`` of each body that ran."""
    if not out.exists():
        return []
    found = []
    for line in out.read_text().splitlines():
        label, task_id, at = line.split()
        found.append((label, task_id, float(at)))
    return found


@pytest.fixture
def user(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The user's folder (``proj/``) and environment: a private Redis, an
    empty database, nothing of ours configured."""
    redis = services.start_embedded_redis()
    server = services.require("postgresql", services.postgres_url)
    name = f"swh_guide_{uuid.uuid4().hex[:10]}"
    database = services.create_empty_database(server, name)
    folder = tmp_path / "home"
    (folder / "proj").mkdir(parents=True)
    (folder / "proj" / "__init__.py").write_text("")
    (folder / "proj" / "celery.py").write_text(APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWH_SCHEDULER_", "CELERY"))}
    env.update(
        PROJ_BROKER=redis.url,
        PROJ_DB=database,
        PROJ_OUT=str(folder / "bodies.txt"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        PYTHONPATH="",
    )
    try:
        yield folder, env
    finally:
        redis.stop()
        services.drop_database(server, name)


def test_the_guide_with_a_users_app_and_a_worker_without_events(
    user: tuple[Path, dict[str, str]],
) -> None:
    folder, env = user
    out = folder / "bodies.txt"
    lines = guide_commands()
    daemons = [line for line in lines if " start-" in line or line.startswith("celery ")]
    assert [d.split()[0] for d in daemons] == ["swh", "celery", "celery"], lines
    processes = Processes(folder, env)
    try:
        for number, line in enumerate(lines):
            if line in daemons:
                name = ["listener", "worker", "beat"][daemons.index(line)]
                processes.start(name, *argv(line))
                if name == "worker":  # the listener turns its task events on
                    wait_until(
                        lambda: (
                            "sent no task events (started without -E): turned them on"
                            in processes.log("listener")
                        ),
                        60,
                        "the listener turning the worker's task events on",
                    )
                continue
            done = subprocess.run(
                argv(line), cwd=folder, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, (line, done.stdout, done.stderr)
            if "--dry-run" in line:  # the database it reads, and from where
                first = done.stdout.splitlines()[0]
                assert first.startswith("would write to database postgresql"), first
                assert first.endswith("(from the swh_scheduler_db_url of the app proj.celery:app)")
            if number == 0:
                assert "is at revision" in done.stdout
        # each daemon's first line names the app's database and broker
        redis_port = env["PROJ_BROKER"].rsplit(":", 1)[1]
        listener_first = processes.log("listener").splitlines()[0]
        assert "start-listener: database postgresql" in listener_first
        assert f"127.0.0.1:{redis_port} (from the broker_url of the app proj.celery:app)" in (
            listener_first
        )
        assert "WARNING" not in listener_first

        def fired() -> bool:
            processes.check_alive()
            labels = collections.Counter(label for label, _, _ in bodies(out))
            return labels["cron"] >= 1 and labels["5s"] >= 4 and labels["7s"] >= 3

        wait_until(fired, 150, "every entry firing, the crontab included")
        ran = bodies(out)
        # every entry keeps firing: no stall (the runs' ends are recorded)
        for label, period in (("5s", 5.0), ("7s", 7.0)):
            times = [at for name, _, at in ran if name == label]
            gaps = [b - a for a, b in itertools.pairwise(times)]
            assert gaps and max(gaps) <= period + 4 * patience(), (label, gaps)
        # no body ran twice: each Celery id once
        assert len({task_id for _, task_id, _ in ran}) == len(ran), ran
        listener = processes.log("listener")
        assert "takes tasks without sending task events" not in listener, listener[-3000:]
        # no warning: the worker began nothing before its events were on
        assert " WARNING " not in listener, listener[-3000:]
    finally:
        processes.stop_all()


def test_a_worker_whose_task_events_cannot_be_turned_on(
    user: tuple[Path, dict[str, str]],
) -> None:
    """Its remote control off: named in a warning, its runs held."""
    folder, env = user
    out = folder / "bodies.txt"
    setup = [guide_commands()[0], "swh scheduler import-beat --app proj.celery:app --create-types"]
    for line in setup:
        done = subprocess.run(
            argv(line), cwd=folder, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (line, done.stdout, done.stderr)
    processes = Processes(folder, env)
    try:
        processes.start("listener", *argv("swh scheduler start-listener --app proj.celery:app"))
        processes.env = {**env, "PROJ_REMOTE_CONTROL": "0"}
        before = 0
        processes.start("blind", *argv("celery -A proj worker --loglevel INFO -n blind@%h"))
        processes.env = env
        processes.start("beat", *argv("celery -A proj beat -S swh"))
        wait_until(
            lambda: (
                "worker blind@" in processes.log("listener")
                and "takes tasks without sending task events" in processes.log("listener")
            ),
            90,
            "the listener naming the worker without task events",
        )
        stalled = bodies(out)
        assert len(stalled) > before  # it took runs, which are never seen to end
        # past the monitor's re-publishing delay, nothing ran again
        held_since = stalled[-1][2]
        wait_until(
            lambda: time.time() > held_since + REPUBLISH_AFTER + 10,
            REPUBLISH_AFTER + 30,
            "the re-publishing delay to pass",
        )
        ran = bodies(out)
        assert len({task_id for _, task_id, _ in ran}) == len(ran), ran
        assert "re-published" not in processes.log("beat")
        # what explain says of a run it took
        store = SQLAlchemyStore.from_url(env["PROJ_DB"])
        try:
            taken = {task_id for _, task_id, _ in ran[before:]}
            open_runs = [
                (task, run)
                for task in store.search_tasks()
                for run in store.get_task_runs(task.id or 0, limit=1)
                if run.backend_id in taken and run.status.is_open
            ]
        finally:
            store.close()
        assert open_runs, "no run of the blind worker is open"
        task, _ = open_runs[0]
        explained = subprocess.run(
            argv(f"swh scheduler task explain {task.id}"),
            cwd=folder,
            env={**env, "SWH_SCHEDULER_DB_URL": env["PROJ_DB"]},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert explained.returncode == 0, explained.stderr
        assert "no task-started event arrived" in explained.stdout, explained.stdout
        assert "blind@" in explained.stdout and "waits in queue" not in explained.stdout
    finally:
        processes.stop_all()
