"""``--metrics-port`` and ``--metrics-host`` of ``start-runner`` and
``start-listener``, as an operator starts them: the address the metrics
listen on, and a port taken or an address this host lacks refused by name
(a clear line, no traceback)."""

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
import psutil
import pytest
from services import redis_url
from waiting import wait_until

SWH = str(Path(sys.executable).with_name("swh"))
COMMANDS = ["start-runner", "start-listener"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command(sqlite_url: str, name: str, *options: str) -> list[str]:
    broker = ["--broker-url", redis_url()]
    return [SWH, "scheduler", "--db-url", sqlite_url, name, *broker, *options]


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SWH_SCHEDULER_")}


@contextmanager
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.redis
@pytest.mark.parametrize("name", COMMANDS)
def test_a_port_taken_or_an_address_not_here_is_refused_by_name(sqlite_url: str, name: str) -> None:
    with taken_port() as port:
        options = ("--metrics-host", "127.0.0.1", "--metrics-port", str(port))
        done = subprocess.run(
            command(sqlite_url, name, *options),
            capture_output=True,
            text=True,
            timeout=60,
            env=environment(),
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"error: metrics-port: cannot serve metrics on 127.0.0.1:{port}: Address already in use"
    )
    assert "Traceback" not in done.stderr
    # a documentation address (RFC 5737) no interface here has: bound, never sent to
    options = ("--metrics-host", "192.0.2.1", "--metrics-port", str(free_port()))
    done = subprocess.run(
        command(sqlite_url, name, *options),
        capture_output=True,
        text=True,
        timeout=60,
        env=environment(),
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "error: metrics-host: cannot serve metrics on 192.0.2.1:"
    ), done.stderr


@pytest.mark.redis
@pytest.mark.parametrize("name", COMMANDS)
def test_the_metrics_listen_on_the_address_given(
    sqlite_url: str, name: str, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "daemon.log"
    options = ("--metrics-host", "127.0.0.1", "--metrics-port", str(port))
    with open(log, "wb") as out:
        daemon = subprocess.Popen(
            command(sqlite_url, name, *options), stdout=out, stderr=out, env=environment()
        )
    try:

        def serving() -> bool:
            assert daemon.poll() is None, log.read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).is_success
            except httpx.TransportError:
                return False

        wait_until(serving, 60, "the metrics to be served")
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        prefix = "swh_scheduler_runner_" if name == "start-runner" else "swh_scheduler_listener_"
        assert prefix in text
        listening = {
            (c.laddr.ip, c.laddr.port)
            for c in psutil.Process(daemon.pid).net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN
        }
        assert ("127.0.0.1", port) in listening
        assert ("0.0.0.0", port) not in listening and ("::", port) not in listening
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
