"""The procrastinate app of the ``peers-e2e`` scenario: the no-op body of
:mod:`benchmarks.worker_app` as two procrastinate tasks, ``bench.noop`` (a
plain function, which procrastinate runs in a thread) and
``bench.noop_async`` (the same body called from a coroutine, run on the
worker's event loop).

    SWH_BENCH_PROCRASTINATE_DB_URL=postgresql://... \
        procrastinate --app benchmarks.procrastinate_app.app worker -c 2

Benchmark-only, and only with the ``bench`` extra (procrastinate).
"""

from __future__ import annotations

import os
from typing import Any

import procrastinate

from .worker_app import body

#: the two tasks, by name: a plain function and a coroutine
SYNC_TASK = "bench.noop"
ASYNC_TASK = "bench.noop_async"


def make_app(db_url: str, pool_size: int = 10) -> procrastinate.App:
    """An app on ``db_url`` whose connection pool holds up to ``pool_size``
    connections (one per job at a time, plus the LISTEN one)."""
    connector = procrastinate.PsycopgConnector(
        conninfo=db_url, min_size=1, max_size=max(pool_size, 1)
    )
    app = procrastinate.App(connector=connector)

    @app.task(name=SYNC_TASK)
    def noop(**kwargs: Any) -> dict[str, str]:
        return body()

    @app.task(name=ASYNC_TASK)
    async def noop_async(**kwargs: Any) -> dict[str, str]:
        return body()

    return app


app = make_app(
    os.environ.get(
        "SWH_BENCH_PROCRASTINATE_DB_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    ),
    int(os.environ.get("SWH_BENCH_PROCRASTINATE_POOL", "10")),
)
