"""``swh scheduler rpc-serve`` as a real process, for the tests that need
its connection handling (uvicorn's protocol, the command's options)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from waiting import wait_until

SWH = str(Path(sys.executable).with_name("swh"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def peak_kib(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health").status_code in (200, 503)
    except httpx.HTTPError:
        return False


@contextmanager
def serving_process(
    sqlite_url: str, tmp_path: Path, *options: str
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``rpc-serve`` with ``options`` (its log in ``serve.log``), until it answers."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWH_SCHEDULER_")}
    command = [SWH, "scheduler", "--db-url", sqlite_url, "rpc-serve", "--port", str(port)]
    with open(tmp_path / "serve.log", "wb") as out:
        server = subprocess.Popen([*command, *options], stdout=out, stderr=out, env=env)
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}"), 30, "the server to start")
        yield server, port
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
