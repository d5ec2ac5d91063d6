"""A live worker that takes tasks without sending task events, on the HTTP
face: ``/health`` degraded naming it (``workers_without_task_events``),
and ``explain`` saying its runs' state is unknown."""

from __future__ import annotations

from datetime import timedelta

import httpx
from api_server import Clock

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.domain.records import BlindWindow, WorkerSighting
from swh_like_scheduler.store import SQLAlchemyStore

MIN = timedelta(minutes=1)


def live(store: SQLAlchemyStore, clock: Clock, *names: str) -> None:
    store.record_worker_sightings(
        [WorkerSighting(n, clock.now, True, 2.0, 100 + i) for i, n in enumerate(names)]
    )


def test_health_names_a_live_worker_without_task_events(
    store: SQLAlchemyStore, clock: Clock, anonymous: httpx.Client
) -> None:
    live(store, clock, "good@box", "plain@box")
    answer = anonymous.get("/health")
    assert answer.status_code == 200
    assert answer.json()["workers_without_task_events"] == []
    store.mark_blind_workers([BlindWindow("plain@box", since=clock.now)])
    answer = anonymous.get("/health")
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "degraded"
    assert body["workers_without_task_events"] == ["plain@box"]
    [reason] = body["reasons"]
    assert reason.startswith("worker(s) plain@box take tasks without sending task events")
    assert "start them with -E" in reason
    # its task events arrive again: the window closes, health is ok
    store.mark_blind_workers([BlindWindow("plain@box", since=None, until=clock.now + MIN)])
    answer = anonymous.get("/health")
    assert answer.status_code == 200
    assert answer.json()["workers_without_task_events"] == []


def test_health_leaves_out_a_worker_gone_or_restarted(
    store: SQLAlchemyStore, clock: Clock, anonymous: httpx.Client
) -> None:
    live(store, clock, "a@box", "b@box")
    store.mark_blind_workers(
        [BlindWindow("a@box", since=clock.now), BlindWindow("b@box", since=clock.now)]
    )
    assert anonymous.get("/health").json()["workers_without_task_events"] == ["a@box", "b@box"]
    clock.now += MIN
    store.record_worker_sightings(
        [
            WorkerSighting("a@box", clock.now, False, 2.0, 100),  # offline
            WorkerSighting("b@box", clock.now, True, 2.0, 999),  # a new process
        ]
    )
    answer = anonymous.get("/health")
    assert answer.json()["workers_without_task_events"] == []
    assert answer.status_code == 200


def test_explain_says_a_run_such_a_worker_may_hold_is_unknown(
    store: SQLAlchemyStore, clock: Clock, client: httpx.Client, sleep_type: TaskType
) -> None:
    [task] = store.create_tasks(
        [
            Task(
                type="sleep",
                args=(1,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=timedelta(hours=1),
                next_run=clock.now - MIN,
                deadline=clock.now + MIN,
            )
        ],
        now=clock.now - MIN,
    )
    [claimed] = store.claim_ready_tasks("sleep", now=clock.now, limit=1)
    store.mark_published([claimed.batch], at=clock.now)
    live(store, clock, "plain@box")
    run = client.get(f"/tasks/{task.id}/explain").json()["run"]
    assert run["phase"] == "queued"
    store.mark_blind_workers([BlindWindow("plain@box", since=clock.now)])
    run = client.get(f"/tasks/{task.id}/explain").json()["run"]
    assert run["phase"] == "unknown"
    assert "worker plain@box, which sends no task events" in run["detail"]
