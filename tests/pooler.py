"""A private PgBouncer in front of the tests' PostgreSQL.

Each :class:`PrivatePgBouncer` runs Debian's ``pgbouncer`` on a free
127.0.0.1 port, with its own ini file, user list and log in a temporary
directory, in front of the PostgreSQL server the tests use
(:func:`services.postgres_url`), for the databases it is given. Clients log
in to it without a password (``auth_type = trust``); it logs in to
PostgreSQL as the server URL's user. As root it runs as ``postgres`` (it
refuses to run as root). No ``pgbouncer`` on the machine raises
:class:`services.ServiceUnavailable`: :func:`services.require` skips the
test, or fails it under ``CI``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import services

START_TIMEOUT = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def _run_as() -> str | None:
    """The user PgBouncer runs as when we are root (it refuses root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise services.ServiceUnavailable("no user to run pgbouncer as (it refuses to run as root)")


def _quoted(value: str) -> str:
    """A value of a ``[databases]`` line (libpq-style quoting)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class PrivatePgBouncer:
    """PgBouncer on a free port, in front of ``server_url`` for ``databases``."""

    def __init__(
        self,
        server_url: str,
        databases: Sequence[str],
        *,
        pool_mode: str = "transaction",
        pool_size: int = 2,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        executable = shutil.which("pgbouncer") or (
            "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
        )
        if executable is None:
            raise services.ServiceUnavailable(
                "no pgbouncer on this machine (apt-get install pgbouncer)"
            )
        self.executable = executable
        self.server = urllib.parse.urlsplit(services.libpq_url(server_url))
        self.user = urllib.parse.unquote(self.server.username or "postgres")
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="swh-test-pgbouncer-"))
        self.log = self.dir / "pgbouncer.log"
        self.run_as = _run_as()
        self.process: subprocess.Popen[bytes] | None = None
        self._write_config(databases, pool_mode, pool_size, dict(settings or {}))

    def _write_config(
        self, databases: Sequence[str], pool_mode: str, pool_size: int, settings: dict[str, str]
    ) -> None:
        server = self.server
        login = [f"host={server.hostname or '127.0.0.1'}", f"port={server.port or 5432}"]
        login.append(f"user={_quoted(self.user)}")
        if server.password:
            login.append(f"password={_quoted(urllib.parse.unquote(server.password))}")
        lines = ["[databases]"]
        lines += [f"{name} = dbname={_quoted(name)} {' '.join(login)}" for name in databases]
        config = {
            "listen_addr": "127.0.0.1",
            "listen_port": str(self.port),
            "unix_socket_dir": "",
            "auth_type": "trust",
            "auth_file": str(self.dir / "userlist.txt"),
            "pool_mode": pool_mode,
            "default_pool_size": str(pool_size),
            "max_client_conn": "500",
            "logfile": str(self.log),
            "pidfile": "",
            "log_connections": "0",
            "log_disconnections": "0",
            **settings,
        }
        lines += ["", "[pgbouncer]", *(f"{key} = {value}" for key, value in config.items())]
        (self.dir / "pgbouncer.ini").write_text("\n".join(lines) + "\n")
        (self.dir / "userlist.txt").write_text(f'"{self.user}" ""\n')
        if self.run_as is not None:
            for path in (self.dir, *self.dir.iterdir()):
                shutil.chown(path, self.run_as)

    def url(self, database: str, **query: str) -> str:
        """A SQLAlchemy URL of ``database`` through the pooler."""
        tail = f"?{urllib.parse.urlencode(query)}" if query else ""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}{tail}"

    def start(self) -> None:
        prefix = ["runuser", "-u", self.run_as, "--"] if self.run_as else []
        with (self.dir / "stdout.log").open("ab") as out:
            self.process = subprocess.Popen(
                [*prefix, self.executable, str(self.dir / "pgbouncer.ini")],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.dir,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.process.poll() is None:
            if _accepts(self.port):
                return
            time.sleep(0.05)
        output = self.log_text() + (self.dir / "stdout.log").read_text(errors="replace")
        self.close()
        raise services.ServiceUnavailable(f"pgbouncer did not start: {output[-2000:]}")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def pgbouncer(
    server_url: str, databases: Sequence[str], **options: object
) -> Iterator[PrivatePgBouncer]:
    """A started :class:`PrivatePgBouncer` for the block (the test skipped,
    or failed under ``CI``, when it cannot run)."""
    try:
        bouncer = PrivatePgBouncer(server_url, databases, **options)  # type: ignore[arg-type]
        bouncer.start()
    except services.ServiceUnavailable as exc:
        services.require("pgbouncer", _raising(exc))  # skips, or fails under CI
        raise
    try:
        yield bouncer
    finally:
        bouncer.close()


def _raising(error: Exception) -> Callable[[], str]:
    def resolve() -> str:
        raise error

    return resolve
