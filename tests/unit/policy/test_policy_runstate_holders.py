"""A dispatched run a worker without task events may have taken: its state
is unknown, not "waits in queue" (:func:`swh_like_scheduler.policy.run_state`
with ``holders``)."""

from __future__ import annotations

import dataclasses

from policy_helpers import MIN, at, make_task, make_type

from swh_like_scheduler.domain.model import RunStatus, TaskRun, TaskStatus
from swh_like_scheduler.domain.records import WorkerState
from swh_like_scheduler.policy import RunPhase, explain, run_state

SCHEDULED = make_task(status=TaskStatus.SCHEDULED)
QUEUED = TaskRun(
    id=12,
    task_id=7,
    backend_id="2f93b051-8c96-3d5b-a769-630874f9e5cb",
    slot=at(0),
    scheduled=at(0),
    status=RunStatus.SCHEDULED,
)


def blind(name: str) -> WorkerState:
    return WorkerState(name, at(0) + MIN, True, 2.0, 99, at(-1), blind_since=at(0) - MIN)


def test_a_run_a_blind_worker_may_hold_is_unknown_and_names_it() -> None:
    now = at(0) + 5 * MIN
    state = run_state(SCHEDULED, QUEUED, now, queue="sleep-q", holders=[blind("plain@box")])
    assert state is not None
    assert state.phase is RunPhase.UNKNOWN and state.is_open
    assert state.detail == (
        "run 12 was dispatched at 2024-06-03T12:00:00+00:00 (5m ago) and no task-started "
        "event arrived: its message may have left the queue for worker plain@box, which "
        "sends no task events (started without -E); whether it runs, ran or waits is "
        "unknown, and it is not published again while that worker is alive"
    )
    assert "waits in queue" not in state.detail
    assert state.to_dict()["phase"] == "unknown"


def test_every_holder_is_named() -> None:
    state = run_state(SCHEDULED, QUEUED, at(1), holders=[blind("a@box"), blind("b@box")])
    assert state is not None and state.phase is RunPhase.UNKNOWN
    assert "for workers a@box, b@box," in state.detail


def test_without_holders_the_run_waits_in_its_queue() -> None:
    state = run_state(SCHEDULED, QUEUED, at(1), queue="sleep-q", holders=[])
    assert state is not None and state.phase is RunPhase.QUEUED
    assert "waits in queue sleep-q" in state.detail


def test_a_run_seen_to_start_or_end_is_known_whatever_the_holders() -> None:
    holders = [blind("plain@box")]
    started = dataclasses.replace(QUEUED, status=RunStatus.STARTED, started=at(0) + MIN)
    state = run_state(SCHEDULED, started, at(1), holders=holders)
    assert state is not None and state.phase is RunPhase.RUNNING
    ended = dataclasses.replace(
        QUEUED, status=RunStatus.EVENTFUL, started=at(0) + MIN, ended=at(0) + 2 * MIN
    )
    state = run_state(make_task(status=TaskStatus.WAITING), ended, at(1), holders=holders)
    assert state is not None and state.phase is RunPhase.ENDED


def test_explain_says_the_unknown_run_blocks_the_task() -> None:
    state = run_state(SCHEDULED, QUEUED, at(1), holders=[blind("plain@box")])
    answer = explain(SCHEDULED, make_type(), at(1), run=state)
    assert not answer.ready
    [blocker] = [b for b in answer.blocked_by if "run 12" in b]
    assert "worker plain@box, which sends no task events" in blocker
    assert answer.to_dict()["run"]["phase"] == "unknown"
