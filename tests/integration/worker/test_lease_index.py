"""A lease finished by the worker itself files its task in the Redis index
(``SWH_SCHEDULER_INDEX_URL`` given to the worker), with no listener."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
import services
from waiting import delete_queues, wait_until

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import RunStatus, TaskStatus
from swh_like_scheduler.index import RedisIndex
from swh_like_scheduler.store import SQLAlchemyStore

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "listener"))

import leaseapp
from celeryproc import worker_process
from listenertest import make_test_app
from test_result_event import add_task, ended_run, queue, store, worker_env

__all__ = ["queue", "store"]  # fixtures shared with test_result_event

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]


def test_a_lease_finished_by_its_worker_files_the_task_in_the_index(
    store: SQLAlchemyStore, postgres_url: str, queue: str
) -> None:
    broker_url = services.redis_url()
    app = make_test_app(broker_url)
    task = add_task(store, queue, leaseapp.TASK_NAME, {"duration": 0.1}, lease=True)
    # the index the worker is given (the default key prefix, as in production)
    index = RedisIndex(redis.Redis.from_url(services.redis_url()))
    env = {**worker_env(broker_url, postgres_url), "SWH_SCHEDULER_INDEX_URL": services.redis_url()}
    try:
        with worker_process("leaseapp", queues=[queue], env=env, pool="threads", concurrency=1):
            # the runner's store here is not indexed, and no listener runs:
            # only the worker's own write can file the task
            assert tick(store, app, datetime.now(UTC)).published == 1
            wait_until(lambda: ended_run(store, task), 30, "the worker to finish the lease")
        run = ended_run(store, task)
        assert run is not None and run.status is RunStatus.EVENTFUL
        [after] = store.get_tasks([task.id or 0])
        assert after.status is TaskStatus.WAITING and after.next_run > run.ended
        keys = index.keys(task.type)
        score = index.client.zscore(keys.wait, str(task.id))
        assert score == after.next_run.timestamp()
    finally:
        delete_queues(app, queue)
        index.client.delete(*index.keys(task.type).all())
