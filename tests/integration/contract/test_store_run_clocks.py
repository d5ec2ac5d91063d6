"""Contract: a run is never recorded as started before it was dispatched,
nor as ended before it started, whatever instants its worker reported (a
worker's clock behind the database's, before the listener has measured
it: the listener corrects what it can, the store bounds the rest)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def test_a_start_before_the_dispatch_and_an_end_before_the_start_are_bounded(store: Any) -> None:
    store.create_task_type(TaskType(type="clocks", backend_name="x.clocks"))
    store.create_tasks(
        [
            Task(
                type="clocks",
                args=(n,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=T0 - S,
                deadline=T0 - S,
            )
            for n in range(3)
        ],
        now=T0 - 10 * S,
    )
    behind, fine, batch = store.claim_ready_tasks("clocks", now=T0, limit=3)
    # a worker 90 s behind: its start is before the dispatch, its end too
    started = store.start_task_run(behind.backend_id, started=T0 - 90 * S, worker="w@late")
    assert started.started == T0 and started.scheduled == T0
    ended = store.end_task_run(behind.backend_id, status=RunStatus.EVENTFUL, ended=T0 - 85 * S)
    assert ended.ended == T0
    # a worker on time is left alone
    assert store.start_task_run(fine.backend_id, started=T0 + 2 * S).started == T0 + 2 * S
    done = store.end_task_run(fine.backend_id, status=RunStatus.EVENTFUL, ended=T0 + 5 * S)
    assert done.ended == T0 + 5 * S
    # in a batch too; an end whose start was never heard of is bounded by
    # the dispatch
    runs = store.start_task_runs([(batch.backend_id, T0 - 60 * S, "w@late")])
    assert runs[batch.backend_id].started == T0
    assert store.get_task_run(batch.backend_id).started == T0
