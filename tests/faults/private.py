"""Private PostgreSQL, Redis and RabbitMQ servers for the fault suite.

Each runs from the machine's own binaries on free 127.0.0.1 ports, with its
data in a temporary directory, so a test may stop, restart, pause
(SIGSTOP) or empty it without touching the shared servers. As root, the
servers run as their system users (``postgres``, ``rabbitmq``), which is
what their packages expect. A server that cannot be started raises
:class:`services.ServiceUnavailable` (a skip, or a failure under CI).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import redis
import services

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def _as_user(user: str) -> list[str]:
    """The prefix that runs a command as ``user`` when we are root."""
    if os.geteuid() != 0:
        return []
    return ["runuser", "-u", user, "--"]


class PrivateServer:
    """A server process in its own session, started and stopped at will."""

    name = "server"
    user = ""
    #: the signal of a clean shutdown
    stop_signal: int = signal.SIGTERM

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"swh-fault-{self.name}-"))
        if os.geteuid() == 0 and self.user:
            shutil.chown(self.dir, self.user)
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "server.log"

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def ready(self) -> bool:
        return _accepts(self.port)

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.environment(),
                cwd=self.dir,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if self.ready():
                return
            time.sleep(0.1)
        tail = self.log.read_text(errors="replace")[-2000:]
        self.kill()
        raise services.ServiceUnavailable(f"private {self.name} did not start: {tail}")

    def _signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def stop(self, timeout: float = 30.0) -> None:
        """A clean shutdown, killed if it takes too long."""
        self._signal(signal.SIGCONT)
        self._signal(self.stop_signal)
        if self.process is not None:
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._wait_port_free()

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        self._wait_port_free()

    def _wait_port_free(self) -> None:
        deadline = time.monotonic() + 10
        while _accepts(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self) -> None:
        self.stop()
        self.start()

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis(PrivateServer):
    name = "redis"

    def command(self) -> list[str]:
        executable = shutil.which("redis-server")
        if executable is None:
            raise services.ServiceUnavailable("no redis-server on this machine")
        return [executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def ready(self) -> bool:
        with contextlib.suppress(redis.RedisError):
            return bool(redis.Redis.from_url(self.url, socket_timeout=0.5).ping())
        return False

    def flushall(self) -> None:
        redis.Redis.from_url(self.url).flushall()


def _postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise services.ServiceUnavailable("no PostgreSQL server binaries on this machine")
    return Path(found[-1]).parent


class PrivatePostgres(PrivateServer):
    name = "postgresql"
    user = "postgres"
    #: PostgreSQL's "fast" shutdown: clients cut off, a clean stop
    stop_signal = signal.SIGINT

    def __init__(self) -> None:
        super().__init__()
        self.data = self.dir / "data"
        subprocess.run(
            [
                *_as_user(self.user),
                str(_postgres_bin() / "initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )

    def command(self) -> list[str]:
        return [
            *_as_user(self.user),
            str(_postgres_bin() / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-k",
            str(self.dir),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
        ]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def ready(self) -> bool:
        with contextlib.suppress(psycopg.Error):
            psycopg.connect(self.url, connect_timeout=1).close()
            return True
        return False


class PrivateRabbitMQ(PrivateServer):
    name = "rabbitmq"
    user = "rabbitmq"

    def __init__(self) -> None:
        super().__init__()
        self.node = f"swhfault{os.getpid()}x{self.port}@localhost"
        self.dist_port = free_port()
        (self.dir / "plugins").write_text("[].\n")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        if os.geteuid() == 0:
            for path in self.dir.iterdir():
                shutil.chown(path, self.user)

    def command(self) -> list[str]:
        server = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
        if not server.exists():
            found = shutil.which("rabbitmq-server")
            if found is None:
                raise services.ServiceUnavailable("no rabbitmq-server on this machine")
            server = Path(found)
        return [*_as_user(self.user), str(server)]

    def environment(self) -> dict[str, str]:
        home = "/var/lib/rabbitmq" if os.geteuid() == 0 else os.environ.get("HOME", "")
        return {
            **os.environ,
            "HOME": home,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq.conf"),
        }

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"
