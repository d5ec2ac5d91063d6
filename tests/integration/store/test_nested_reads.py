"""A read made during a write of the same thread runs on the write's
connection: an end whose ``apply`` reads its task type (a cold cache) needs
no second connection. Before, it waited for one from the pool; with every
connection of a worker's bounded pool held by such ends (threads finishing
at once), each waited for the others until the server ended the
transactions (idle-in-transaction timeout, 30 s): the ends failed."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.session import PoolSize

pytestmark = pytest.mark.postgresql


@pytest.mark.timeout(60)
def test_ends_with_a_cold_type_cache_on_a_pool_of_one(postgres_url: str) -> None:
    setup = SQLAlchemyStore.from_url(postgres_url)
    now = datetime.now(UTC)
    try:
        setup.create_task_type(TaskType(type="t", backend_name="t"))
        tasks = setup.create_tasks(
            [
                Task(type="t", args=(n,), schedule_kind=ScheduleKind.ONESHOT, next_run=now,
                     deadline=now)
                for n in range(4)
            ],
            now=now,
        )  # fmt: skip
        runs = [setup.schedule_task_run(t.id or 0, now=now) for t in tasks]
    finally:
        setup.close()
    store = SQLAlchemyStore.from_url(postgres_url, role="worker", pool=PoolSize(1, 0))
    try:

        def end(n: int) -> RunStatus:
            apply = outcome_applier(TaskTypeCache(store), random.Random(n))  # cold
            ended = store.end_task_run(
                runs[n].backend_id,
                status=RunStatus.EVENTFUL,
                ended=now + timedelta(seconds=1),
                apply=apply,
            )
            assert ended is not None
            return ended.status

        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(end, range(4))) == [RunStatus.EVENTFUL] * 4
        done = store.get_tasks([t.id or 0 for t in tasks])
        assert {t.status.value for t in done} == {"completed"}
    finally:
        store.close()
