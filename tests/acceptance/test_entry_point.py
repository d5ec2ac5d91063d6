"""The installed ``swh`` console script, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.acceptance


def swh_executable() -> str:
    candidate = Path(sys.executable).with_name("swh")
    if not candidate.exists():
        pytest.fail(f"the swh entry point is not installed next to {sys.executable}")
    return str(candidate)


def swh(
    *args: str, env: dict[str, str], input: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [swh_executable(), "scheduler", *args],
        env=env,
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("SWH_SCHEDULER_")}
    values["XDG_DATA_HOME"] = str(tmp_path / "data")
    values["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return values


def test_first_use_on_the_embedded_default(env: dict[str, str], tmp_path: Path) -> None:
    registered = swh("task-type", "register", env=env)
    assert registered.returncode == 0, registered.stderr
    assert "sleep (from sleep): created" in registered.stdout
    assert (tmp_path / "data" / "swh-like-scheduler" / "scheduler.sqlite").exists()
    added = swh("task", "add", "sleep", "duration=0.1", env=env)
    assert added.returncode == 0, added.stderr
    pending = swh("task", "list-pending", "sleep", env=env)
    assert pending.stdout.startswith("Found 1 sleep task\n")
    refused = swh("task", "add", "sleep", "--tz", "Mars/Base", env=env)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "error: tz: 'Mars/Base' is not a known IANA time zone (example: Europe/Paris)"
    )


def test_environment_url_and_help(env: dict[str, str], tmp_path: Path) -> None:
    env["SWH_SCHEDULER_DB_URL"] = f"sqlite:///{tmp_path / 'env.sqlite'}"
    assert swh("db", "init", env=env).returncode == 0
    assert (tmp_path / "env.sqlite").exists()
    helped = swh("--help", env=env)
    assert "SWH_SCHEDULER_DB_URL" in helped.stdout
    unreachable = swh("--db-url", "postgresql://x@127.0.0.1:1/x", "task", "list", env=env)
    assert unreachable.returncode == 1
    assert "Traceback" not in unreachable.stderr
    assert unreachable.stderr.startswith("error: ")


@pytest.mark.postgresql
def test_schedule_from_stdin_into_postgresql(env: dict[str, str], postgres_url: str) -> None:
    env["SWH_SCHEDULER_DB_URL"] = postgres_url
    assert swh("task-type", "register", env=env).returncode == 0
    lines = "".join(f'{{"args": [{n}]}}\n' for n in range(300))
    done = swh("task", "schedule", "--format", "jsonl", "-t", "sleep", "-", env=env, input=lines)
    assert done.returncode == 0, done.stderr
    assert "Created 300 tasks (0 already existed)" in done.stdout
