"""``swh scheduler rpc-serve`` as a user starts it (a real process)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from waiting import wait_until

SWH = str(Path(sys.executable).with_name("swh"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serves_with_a_generated_token(sqlite_url: str, tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWH_SCHEDULER_")}
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [SWH, "scheduler", "--db-url", sqlite_url, "rpc-serve", "--port", str(port)],
            stdout=out,
            stderr=out,
            env=env,
        )
    try:
        wait_until(lambda: "Uvicorn running" in log.read_text(), 30, "the server to start")
        token = re.search(r"generated for this run\): (\S+)", log.read_text())
        assert token is not None, log.read_text()
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/tasks").status_code == 401
        headers = {"Authorization": f"Bearer {token.group(1)}"}
        created = httpx.post(
            f"{url}/task-types", json={"type": "t", "backend_name": "b"}, headers=headers
        )
        assert created.status_code == 201
        assert httpx.get(f"{url}/openapi.json").json()["info"]["title"] == "swh_like_scheduler"
    finally:
        server.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then ends by the signal it was sent
        assert server.wait(30) in (0, -signal.SIGTERM)
    assert "Finished server process" in log.read_text()
    assert log.read_text().count(token.group(1)) == 1  # printed once, never logged


def test_short_tokens_are_refused(sqlite_url: str) -> None:
    done = subprocess.run(
        [SWH, "scheduler", "--db-url", sqlite_url, "rpc-serve", "--tokens", "abc:rw"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: tokens: token 1 is shorter than 16 characters")
