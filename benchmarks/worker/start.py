"""worker-start: the worker's CPU per start, in one process, without a broker.

Celery's own tracer (``celery.app.trace.build_tracer``, what a pool process
runs for each message) runs ``bench.noop`` (a bare Celery task) and
``bench.guarded`` (the same body on the product's base class) once per run
of ours, alternating rounds of each, on a scratch PostgreSQL database whose
runs were claimed beforehand. Measured: this process's CPU time per start
(``time.process_time``) and the CPU time of the database's server processes
per start (``/proc``), the guarded start against the bare one. No event is
sent (no worker consumer in this process), so this is the pool process's
part of a run: the guard's statement, the heartbeat's bookkeeping, the
ownership check at the end, and Celery's own tracing.

``--profile FILE`` (run as ``python -m benchmarks.worker.start``) writes a
cProfile of the guarded rounds instead of measuring.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from celery.app.trace import build_tracer

from ..common import (
    DEFAULT_POSTGRES,
    Context,
    bench_type,
    cpu_seconds,
    database_url,
    fill_tasks,
    log,
    ratio,
    raw,
    scratch_store,
    unique_queue,
    utcnow,
)

STARTS = 3_000
QUICK_STARTS = 1_000
ROUNDS = 4
DATABASE = "swh_bench_worker_start"
HOSTNAME = "bench@localhost"


def server_cpu(store: Any, database: str) -> float:
    """CPU seconds of every server process on ``database`` (but the asking one)."""
    rows = raw(
        store,
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        (database,),
    )
    return sum(cpu_seconds(pid) or 0.0 for (pid,) in rows)


def tracers(url: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The bare and the guarded task's tracers, as a pool process builds them."""
    from .. import worker_app

    app = worker_app.app
    app.conf.swh_scheduler_db_url = url
    app.finalize()
    return (
        build_tracer(worker_app.noop.name, worker_app.noop, hostname=HOSTNAME, app=app),
        build_tracer(worker_app.guarded.name, worker_app.guarded, hostname=HOSTNAME, app=app),
    )


def forget_stores() -> None:
    """Stop the heartbeat and close the guard's store before the database goes
    (the ended runs, never recorded here, are not flushed into it)."""
    from swh_like_scheduler.worker import guard, heartbeat

    heartbeat.close_all()
    for store, _ in guard._stores.values():
        store.close()
    guard._stores.clear()


def request(backend_id: str, name: str) -> dict[str, Any]:
    return {
        "id": backend_id,
        "task": name,
        "hostname": HOSTNAME,
        "delivery_info": {"exchange": "", "routing_key": "bench", "priority": 0},
        "is_eager": False,
    }


def run_round(tracer: Callable[..., Any], ids: list[str], name: str) -> float:
    started = time.process_time()
    for backend_id in ids:
        outcome = tracer(backend_id, (), {}, request(backend_id, name))
        if outcome.info is not None:  # (Celery's trace tuple: no info on success)
            raise AssertionError(f"{name} {backend_id}: {outcome.info.state} {outcome.retval!r}")
    return time.process_time() - started


def measure(ctx: Context | None, starts: int, profile: str | None = None) -> dict[str, Any]:
    postgres = ctx.postgres if ctx is not None else DEFAULT_POSTGRES
    with scratch_store(postgres, DATABASE) as store:
        bench_type(store, unique_queue("start"), max_queue_length=None)
        now = utcnow()
        total = starts * ROUNDS
        fill_tasks(store, total, now=now)
        claimed = store.claim_ready_tasks("bench", now=now + timedelta(seconds=1), limit=total)
        ids = [c.backend_id for c in claimed]
        assert len(ids) == total, f"claimed {len(ids)} of {total}"
        raw(store, "VACUUM ANALYZE task, task_run")
        bare, guarded = tracers(database_url(postgres, DATABASE))
        run_round(guarded, ids[:10], "bench.guarded")  # connect, prepare, warm up
        run_round(bare, ids[:10], "bench.noop")
        ids = ids[10:]
        if profile is not None:
            import cProfile

            profiler = cProfile.Profile(time.thread_time)  # CPU, not waits
            profiler.enable()
            run_round(guarded, ids[: starts * 2], "bench.guarded")
            profiler.disable()
            profiler.dump_stats(profile)
            forget_stores()
            log(f"worker-start: profile of {starts * 2:,} guarded starts in {profile}")
            return {}
        ours: list[float] = []
        theirs: list[float] = []
        server: list[float] = []
        for n in range(ROUNDS - 1):
            chunk = ids[n * starts : (n + 1) * starts]
            before = server_cpu(store, DATABASE)
            ours.append(run_round(guarded, chunk, "bench.guarded") * 1000 / len(chunk))
            server.append((server_cpu(store, DATABASE) - before) * 1000 / len(chunk))
            theirs.append(run_round(bare, chunk, "bench.noop") * 1000 / len(chunk))
            log(
                f"worker-start #{n}: guarded {ours[-1]:.3f} ms (server {server[-1]:.3f}),"
                f" bare {theirs[-1]:.3f} ms of CPU per start"
            )
        started = raw(store, "SELECT count(*) FROM task_run WHERE started IS NOT NULL")[0][0]
        assert started >= (ROUNDS - 1) * starts, f"only {started} runs started"
        forget_stores()
    return {"guarded": ours, "bare": theirs, "server": server}


def run(ctx: Context) -> None:
    starts = QUICK_STARTS if ctx.quick else STARTS
    for _ in range(ctx.repeat):
        found = measure(ctx, starts)
        guarded = statistics.median(found["guarded"])
        bare = statistics.median(found["bare"])
        ctx.measurement(
            "worker-start",
            "guarded_cpu_ms_per_start",
            "ms",
            found["guarded"],
            ratios={"vs_bare": ratio(guarded, bare)},
            starts=starts,
            bare_cpu_ms_per_start=round(bare, 4),
            server_cpu_ms_per_start=round(statistics.median(found["server"]), 4),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of guarded starts")
    parser.add_argument("--starts", type=int, default=STARTS)
    args = parser.parse_args()
    measure(None, args.starts, args.profile)


if __name__ == "__main__":
    main()
