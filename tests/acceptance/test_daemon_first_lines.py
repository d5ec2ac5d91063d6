"""Each daemon's first log line names its database and broker and where each
came from; started with nothing configured, it says it falls back on the
built-in defaults, as a warning, and refuses the database that does not
exist rather than create it (only ``db init`` and ``standalone`` do).

Run as a user runs them: the installed commands, in a folder of their own
(no ``celeryconfig`` to import), with no ``SWH_SCHEDULER_*`` variable and
data and configuration folders of their own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import services
from standalone_run import clean_env

pytestmark = pytest.mark.acceptance

BIN = Path(sys.executable).parent
#: a loopback port nothing listens on (the journal client's Kafka)
NOWHERE = "127.0.0.1:9"
DAEMONS = {
    "start-listener": ["start-listener", "--once"],
    "start-runner": ["start-runner", "--once"],
    "start-monitor": ["start-monitor", "--once"],
    "schedule-recurrent": ["schedule-recurrent", "--once"],
    "journal-client": ["journal-client", "--once", "--broker", NOWHERE, "--wait", "1"],
    "rpc-serve": ["rpc-serve", "--port", "0"],
}
#: the daemons that use no Celery broker
NO_BROKER = {"journal-client", "rpc-serve"}


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def first_log_line(stderr: str) -> str:
    """The first line a daemon logged (time, level, message)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "nothing logged"
    return lines[0]


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_with_nothing_configured_each_daemon_says_so_and_creates_nothing(
    name: str, tmp_path: Path
) -> None:
    env = clean_env(tmp_path)
    default = tmp_path / "xdg_data_home" / "swh-like-scheduler" / "scheduler.sqlite"
    done = run([str(BIN / "swh"), "scheduler", *DAEMONS[name]], tmp_path, env)
    line = first_log_line(done.stderr)
    assert " WARNING " in line, line
    assert f"{name}: database sqlite:///{default} (from the built-in default)" in line
    if name in NO_BROKER:
        assert "broker" not in line.split(". Nobody")[0], line
        assert "Nobody chose the database: it is a built-in default" in line
    else:
        assert "; broker redis://127.0.0.1:6379/0 (from the built-in default)" in line
        assert "Nobody chose the database nor the broker" in line
        assert "--app APP, --broker-url or SWH_SCHEDULER_BROKER_URL" in line
    # the embedded default is not created by a daemon: it refuses
    assert done.returncode != 0
    assert f"no SQLite database at {default}, the built-in default" in done.stderr
    assert "swh scheduler db init" in done.stderr
    assert not default.exists()
    assert "setup plugin" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.postgresql
@pytest.mark.parametrize("name", sorted(set(DAEMONS) - NO_BROKER))
def test_each_daemon_names_its_sources_masks_secrets_and_refuses_an_empty_database(
    name: str, tmp_path: Path
) -> None:
    server = services.require("postgresql", services.postgres_url)
    database = f"swh_empty_{uuid.uuid4().hex[:10]}"
    url = services.create_empty_database(server, database)
    try:
        env = {**clean_env(tmp_path), "SWH_SCHEDULER_DB_URL": url}
        # a password in the broker's URL (nothing listens there: it is never reached)
        broker = "redis://user:s3cret-pw@127.0.0.1:9/3"
        done = run(
            [str(BIN / "swh"), "scheduler", *DAEMONS[name], "--broker-url", broker],
            tmp_path,
            env,
        )
        line = first_log_line(done.stderr)
        assert " INFO " in line, line
        assert "(from SWH_SCHEDULER_DB_URL)" in line
        assert "broker redis://user:***@127.0.0.1:9/3 (from --broker-url)" in line
        assert "s3cret-pw" not in done.stderr
        assert done.returncode != 0
        assert "the database has no scheduler schema; run `swh scheduler db init`" in done.stderr
    finally:
        services.drop_database(server, database)


def test_beat_with_an_app_that_names_nothing_says_so(tmp_path: Path) -> None:
    (tmp_path / "bare.py").write_text(
        textwrap.dedent(
            """
            from celery import Celery

            app = Celery("bare")
            """
        )
    )
    env = clean_env(tmp_path)
    default = tmp_path / "xdg_data_home" / "swh-like-scheduler" / "scheduler.sqlite"
    done = run(
        [str(BIN / "celery"), "-A", "bare", "beat", "-S", "swh", "-l", "INFO"], tmp_path, env
    )
    assert done.returncode == 1, done.stderr[-3000:]
    ours = [line for line in done.stderr.splitlines() if "celery beat -S swh: database" in line]
    assert ours, done.stderr[-3000:]
    assert "Nobody chose the database nor the broker" in ours[0]
    assert f"database sqlite:///{default} (from the built-in default)" in ours[0]
    assert "(from Celery's default: the app bare sets no broker_url)" in ours[0]
    assert "the app's swh_scheduler_db_url setting or SWH_SCHEDULER_DB_URL" in ours[0]
    assert f"beat -S swh cannot start: no SQLite database at {default}" in done.stderr
    assert not default.exists()


def test_standalone_names_its_database_and_broker_first(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    default = tmp_path / "xdg_data_home" / "swh-like-scheduler" / "scheduler.sqlite"
    done = run(
        [
            str(BIN / "swh"),
            "scheduler",
            "standalone",
            "--duration",
            "0",
            "--no-api",
            "--no-examples",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        tmp_path,
        env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0] == (
        f"standalone: database sqlite:///{default} (from the built-in default); broker an "
        "embedded Redis server (from standalone, for this run only)"
    )
