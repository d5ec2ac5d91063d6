"""Running ``swh scheduler standalone`` from a test: its process, its
children, what it wrote."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from swh_like_scheduler.standalone.platform import RUN_ENV

ENDED = ("eventful", "uneventful", "failed")


def swh_executable() -> str:
    candidate = Path(sys.executable).with_name("swh")
    if not candidate.exists():
        pytest.fail(f"the swh entry point is not installed next to {sys.executable}")
    return str(candidate)


def clean_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment without scheduler settings, with its own
    data, configuration and state folders under ``tmp_path``."""
    values = {k: v for k, v in os.environ.items() if not k.startswith("SWH_SCHEDULER_")}
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        values[name] = str(tmp_path / name.lower())
    return values


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.25)


def ended_runs(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5) as conn:
            query = "SELECT count(*) FROM task_run WHERE ended IS NOT NULL AND status IN (?, ?, ?)"
            return int(conn.execute(query, ENDED).fetchone()[0])
    except sqlite3.OperationalError:  # not created yet, or locked for a moment
        return 0


def processes_of(run_dir: Path) -> list[str]:
    """Processes whose command line or environment names ``run_dir``."""
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    marker = f"{RUN_ENV}={run_dir}".encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if str(run_dir).encode() in cmdline or marker in environ.split(b"\0"):
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {command}")
    return found


def assert_nothing_left(run_dir: Path, pids: dict[str, int]) -> None:
    for name, pid in pids.items():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
            pytest.fail(f"{name} (pid {pid}) is still running")
    assert processes_of(run_dir) == []


def start(env: dict[str, str], tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    out = tmp_path / "standalone.out"
    with open(out, "w") as stdout, open(tmp_path / "standalone.err", "w") as stderr:
        process = subprocess.Popen(
            [
                swh_executable(),
                "scheduler",
                "standalone",
                "--run-dir",
                str(tmp_path / "run"),
                *args,
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
    return process, out


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def children(run_dir: Path) -> dict[str, int]:
    data = json.loads((run_dir / "children.json").read_text())
    return {name: int(pid) for name, pid in data["children"].items()}
