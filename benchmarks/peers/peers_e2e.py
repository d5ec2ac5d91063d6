"""peers-e2e: ours beside procrastinate on the same PostgreSQL, the same
no-op body and the same number of jobs, measured in one run.

``ours`` is measured exactly as the ``end-to-end`` scenario measures it
(:func:`benchmarks.whole.end_to_end.ours`: the runner publishes K due tasks
to a real ``celery worker`` subprocess, prefork, concurrency 2, the body
behind the start guard, and the clock stops when the listener has recorded
every run's end in the database).

``procrastinate`` gets a scratch database on the same server with its own
schema (``schema_manager.apply_schema``); its worker runs as real
``procrastinate worker`` subprocesses (the CLI), up and idle (registered, and
LISTENing when the configuration listens) before the clock starts. The clock
starts before K jobs are deferred (its ``batch_defer``, in batches of
:data:`DEFER_BATCH`) and stops when every job's status is ``succeeded`` in the
database: both record every end durably (procrastinate one transaction per
job, our listener in batches). Only one side's processes run at a time.

Its configuration: every entry of :data:`CONFIGS` (``--quick``) or of
:data:`GRID` (full) is measured in the same run, each on its own line, and
the ratio ``ours/procrastinate`` is taken against the best median (named in
the ``ours`` line's ``detail``). On the 2-core machine (2,000 jobs, the grid
tried twice or three times), one worker process tops out at 470-550 jobs/s
whatever its concurrency (1, 2, 4); two processes of concurrency 1, the
coroutine task, were the best (700-880 jobs/s with LISTEN/NOTIFY, 800-880
polling every 50 ms), two of concurrency 2 and three of concurrency 2 within
the noise; concurrency 4 or 8, four processes and the plain-function task (run
in a thread) were slower. Those four are :data:`CONFIGS`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ..common import (
    GUARDED_TASK,
    REPO,
    Context,
    bench_type,
    broker_kind,
    celery_app,
    database_url,
    drop_database,
    fill_tasks,
    log,
    purge,
    ratio,
    reset_tasks,
    scratch_store,
    stop_process,
    task_arguments,
    unique_queue,
    utcnow,
)
from ..whole.end_to_end import CONCURRENCY, QUICK_TASKS, TASKS, TIMEOUT, ours, worker

SCENARIO = "peers-e2e"
DATABASE = "swh_bench_peers_procrastinate"
#: jobs per ``batch_defer`` call (one INSERT each)
DEFER_BATCH = 1_000


@dataclass(frozen=True)
class Config:
    """One way to run procrastinate's workers."""

    #: ``procrastinate worker`` processes
    processes: int
    #: ``--concurrency`` of each
    concurrency: int
    #: ``--listen-notify`` (else the worker polls every ``polling`` seconds)
    listen_notify: bool = True
    #: ``--fetch-job-polling-interval``
    polling: float = 5.0
    #: a coroutine task (run on the event loop) or a plain function (run in a thread)
    task: str = "async"

    @property
    def label(self) -> str:
        notify = "notify" if self.listen_notify else f"poll{self.polling:g}s"
        return f"{self.processes}x{self.concurrency}-{notify}-{self.task}"


#: measured in every run (``--quick``): the best four of :data:`GRID` on the
#: 2-core machine, within each other's noise
CONFIGS = (
    Config(2, 1),
    Config(2, 1, listen_notify=False, polling=0.05),
    Config(2, 2),
    Config(3, 2),
)
#: measured in a full run: what was tried
GRID = (
    *CONFIGS,
    Config(1, 1),
    Config(1, 2),
    Config(1, 4),
    Config(2, 4),
    Config(2, 8),
    Config(3, 1),
    Config(4, 1),
    Config(4, 2),
    Config(2, 4, task="sync"),
    Config(2, 2, listen_notify=False, polling=0.05),
    Config(2, 1, listen_notify=False, polling=0.01),
    Config(4, 1, listen_notify=False, polling=0.05),
)


def _query(url: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


@contextmanager
def scratch_procrastinate(server: str) -> Iterator[str]:
    """A database on ``server`` with procrastinate's schema, applied by its API."""
    from ..procrastinate_app import make_app

    drop_database(server, DATABASE)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    url = database_url(server, DATABASE)
    try:
        with make_app(url, pool_size=1).open() as app:
            app.schema_manager.apply_schema()
        yield url
    finally:
        drop_database(server, DATABASE)


@contextmanager
def procrastinate_workers(url: str, config: Config) -> Iterator[None]:
    """``config.processes`` ``procrastinate worker`` subprocesses, up and idle
    (registered, and LISTENing when ``listen_notify``)."""
    env = {
        **os.environ,
        "SWH_BENCH_PROCRASTINATE_DB_URL": url,
        "SWH_BENCH_PROCRASTINATE_POOL": str(config.concurrency + 2),
    }
    command = [sys.executable, "-m", "procrastinate", "--app", "benchmarks.procrastinate_app.app"]
    command += ["worker", "--concurrency", str(config.concurrency)]
    command += ["--fetch-job-polling-interval", str(config.polling)]
    command += ["--listen-notify" if config.listen_notify else "--no-listen-notify"]
    with ExitStack() as stack:
        processes: list[subprocess.Popen[bytes]] = []
        logs: list[Path] = []
        for n in range(config.processes):
            log_path = Path(tempfile.mkstemp(prefix="swh-bench-procrastinate-", suffix=".log")[1])
            logs.append(log_path)
            with open(log_path, "ab") as out:
                process = subprocess.Popen(
                    [*command, "--name", f"bench-{n}"], cwd=REPO, env=env, stdout=out, stderr=out
                )
            processes.append(process)
            stack.callback(stop_process, process, log_path)
        deadline = time.monotonic() + 60
        while not _ready(url, config):
            if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
                raise RuntimeError(f"procrastinate workers did not start; see {logs}")
            time.sleep(0.1)
        yield


def _ready(url: str, config: Config) -> bool:
    registered = _query(url, "SELECT count(*) FROM procrastinate_workers")[0][0]
    if registered != config.processes:
        return False
    if not config.listen_notify:
        return True
    listening = _query(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND state = 'idle' AND query ILIKE 'LISTEN%%'",
    )[0][0]
    return listening == config.processes


def procrastinate_round(url: str, count: int, config: Config) -> float:
    """Seconds from the first ``batch_defer`` until every job has succeeded."""
    from ..procrastinate_app import ASYNC_TASK, SYNC_TASK, make_app

    _query(url, "TRUNCATE procrastinate_jobs CASCADE")
    task_name = ASYNC_TASK if config.task == "async" else SYNC_TASK
    # the arguments of ours (procrastinate takes keyword arguments only)
    jobs: list[dict[str, Any]] = [
        {"n": args[0], **kwargs} for args, kwargs in map(task_arguments, range(count))
    ]
    with make_app(url, pool_size=1).open() as app, procrastinate_workers(url, config):
        task = app.tasks[task_name]
        started = time.perf_counter()
        for first in range(0, count, DEFER_BATCH):
            task.batch_defer(*jobs[first : first + DEFER_BATCH])
        statement = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        with psycopg.connect(url, autocommit=True) as conn:
            while (done := conn.execute(statement).fetchone()[0]) < count:  # type: ignore[index]
                if time.perf_counter() - started > TIMEOUT:
                    raise RuntimeError(f"{count - done} jobs not succeeded after {TIMEOUT}s")
                time.sleep(0.02)
        return time.perf_counter() - started


def run(ctx: Context) -> None:
    try:
        import procrastinate  # noqa: F401
    except ImportError:
        ctx.note(SCENARIO, skipped="procrastinate is not installed (the bench extra)")
        return
    count = QUICK_TASKS if ctx.quick else TASKS
    configs = CONFIGS if ctx.quick else GRID
    broker = ctx.amqp or ctx.redis
    kind = broker_kind(broker)
    app = celery_app(broker, worker_send_task_events=True, task_send_sent_event=False)
    queue = unique_queue("peers-e2e")
    mine: list[float] = []
    theirs: dict[Config, list[float]] = {config: [] for config in configs}
    with ExitStack() as stack:
        store = stack.enter_context(scratch_store(ctx.postgres, "swh_bench_peers_e2e"))
        url = stack.enter_context(scratch_procrastinate(ctx.postgres))
        bench_type(store, queue, max_queue_length=count)
        store.update_task_type("bench", backend_name=GUARDED_TASK)
        fill_tasks(store, count, now=utcnow())
        db_url = store.engine.url.render_as_string(hide_password=False)
        stack.callback(purge, app, queue)
        for attempt in range(ctx.repeat):
            with worker(broker, queue, app, db_url):
                reset_tasks(store, due_at=utcnow())
                mine.append(count / ours(store, app, count))
            for config in configs:
                theirs[config].append(count / procrastinate_round(url, count, config))
            log(
                f"{SCENARIO} {count:,} #{attempt}: ours {mine[-1]:,.0f} tasks/s, "
                + ", ".join(f"{c.label} {v[-1]:,.0f}" for c, v in theirs.items())
            )
    best = max(configs, key=lambda c: statistics.median(theirs[c]))
    best_rate = statistics.median(theirs[best])
    ctx.measurement(
        SCENARIO,
        "ours",
        "tasks/s",
        mine,
        ratios={"ours/procrastinate": ratio(statistics.median(mine), best_rate)},
        digits=0,
        broker=kind,
        tasks=count,
        concurrency=CONCURRENCY,
        # not a parameter (the line stays the same measurement whichever wins)
        detail={"procrastinate": best.label, "procrastinate_tasks_s": round(best_rate)},
    )
    for config in configs:
        ctx.measurement(
            SCENARIO,
            "procrastinate",
            "tasks/s",
            theirs[config],
            digits=0,
            tasks=count,
            config=config.label,
            detail={**asdict(config), "best": config == best},
        )
