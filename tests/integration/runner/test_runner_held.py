"""The runner keeps its period while another transaction holds ready rows
(its claim skips them: before, it passed again at once, ~23 passes a
second with ``--period 1``)."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import UTC, datetime

import psycopg
import pytest
import services
from runnertest import make_test_app, new_type, ready_tasks
from waiting import delete_queues as purge
from waiting import wait_until

from swh_like_scheduler.broker import queue_depth
from swh_like_scheduler.dispatch.serve import PassReport
from swh_like_scheduler.runner import loop
from swh_like_scheduler.runner.wakeup import waker_for
from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]


def test_the_runner_keeps_its_period_while_ready_rows_are_held(
    pg_store: SQLAlchemyStore, postgres_url: str
) -> None:
    app = make_test_app(services.redis_url())
    now = datetime.now(tz=UTC)
    task_type = new_type(pg_store, None)
    pg_store.import_tasks(ready_tasks(task_type, 50, now), now=now)
    passes: list[tuple[float, PassReport]] = []
    stop = threading.Event()
    steps = loop.RunnerLoop(
        pg_store,
        app,
        period=1.0,
        types=[task_type.type],
        on_pass=lambda report: passes.append((time.monotonic(), report)),
    )
    waker = waker_for(pg_store.engine, stop)
    runner = threading.Thread(target=loop.run, args=(steps, waker), kwargs={"stop": stop})
    try:
        with psycopg.connect(services.libpq_url(postgres_url)) as holder:
            # a claim under way, or stalled, holds every ready row
            holder.execute("SELECT id FROM task FOR UPDATE")
            runner.start()
            wait_until(lambda: len(passes) >= 4, 30, "four passes")
            held = passes[:4]
            gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(held)]
            assert min(gaps) >= 0.9, gaps  # the period (1 s), not at once
            assert all(report.held and report.claimed == 0 for _, report in held)
        # the rows are free: the next pass takes them all, once
        wait_until(
            lambda: sum(report.claimed for _, report in passes) == 50, 30, "a pass claiming 50"
        )
        assert queue_depth(app, task_type.effective_queue) == 50
    finally:
        stop.set()
        runner.join(timeout=30)
        waker.close()
        purge(app, task_type.effective_queue)
