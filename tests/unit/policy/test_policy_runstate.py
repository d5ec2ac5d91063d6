"""Which state a task's run is in, and why an action changed nothing
(:mod:`swh_like_scheduler.policy.runstate`)."""

from __future__ import annotations

from policy_helpers import MIN, at, make_task, make_type

from swh_like_scheduler.domain.model import RunStatus, TaskRun, TaskStatus
from swh_like_scheduler.domain.records import ASSIGNED, WorkerState
from swh_like_scheduler.policy import RunPhase, explain, run_state, why_unchanged

WORKER = "sleep@box"


def a_run(status: RunStatus = RunStatus.SCHEDULED, **changes: object) -> TaskRun:
    values: dict[str, object] = {
        "id": 12,
        "task_id": 7,
        "backend_id": "2f93b051-8c96-3d5b-a769-630874f9e5cb",
        "slot": at(0),
        "scheduled": at(0),
        "status": status,
    }
    values.update(changes)
    return TaskRun(**values)  # type: ignore[arg-type]


SCHEDULED = make_task(status=TaskStatus.SCHEDULED)
QUEUED = a_run()
RUNNING = a_run(
    RunStatus.STARTED,
    started=at(0) + MIN,
    worker=WORKER,
    history=({"event": ASSIGNED, "pid": 4242},),
)


def test_a_dispatched_run_waits_in_its_queue() -> None:
    state = run_state(SCHEDULED, QUEUED, at(0) + 5 * MIN, queue="sleep-q")
    assert state is not None and state.phase is RunPhase.QUEUED and state.is_open
    assert state.detail == (
        "run 12 was dispatched at 2024-06-03T12:00:00+00:00 (5m ago) and has not started "
        "yet: its message waits in queue sleep-q for a worker"
    )


def test_a_started_run_says_by_which_worker_since_when_and_how_the_worker_is() -> None:
    now = at(0) + 10 * MIN
    state = run_state(SCHEDULED, RUNNING, now)
    assert state is not None and state.phase is RunPhase.RUNNING
    assert "run 12 started at 2024-06-03T12:01:00+00:00 (9m ago) by worker sleep@box" in (
        state.detail
    )
    assert "(main process 4242)" in state.detail
    online = WorkerState(WORKER, now - MIN / 2, True, 2.0, 4242)
    said = run_state(SCHEDULED, RUNNING, now, worker=online)
    assert said is not None and "its worker was last heard from at" in said.detail
    offline = WorkerState(WORKER, now - 2 * MIN, False, 2.0, 4242)
    said = run_state(SCHEDULED, RUNNING, now, worker=offline)
    assert said is not None and "its worker is offline since" in said.detail
    assert "`lost`" in said.detail


def test_an_end_that_never_reached_the_task_is_told() -> None:
    ended = a_run(RunStatus.EVENTFUL, started=at(0), ended=at(0) + MIN, worker=WORKER)
    state = run_state(SCHEDULED, ended, at(1))
    assert state is not None and state.phase is RunPhase.END_NOT_APPLIED
    assert "ended eventful at" in state.detail and "was not applied to the task" in state.detail
    waiting = make_task(status=TaskStatus.WAITING)
    assert run_state(waiting, ended, at(1)).phase is RunPhase.ENDED  # type: ignore[union-attr]
    assert run_state(waiting, None, at(1)) is None
    nothing = run_state(SCHEDULED, None, at(1))
    assert nothing is not None and nothing.phase is RunPhase.NO_RUN


def test_explain_reads_the_run_not_the_owner_fields() -> None:
    """The issue's case: the run started (``task runs`` said so) but the
    task's owner fields were empty: explain said it had not reported its
    start."""
    state = run_state(SCHEDULED, RUNNING, at(1))
    answer = explain(SCHEDULED, make_type(), at(1), run=state)
    assert not answer.ready
    [blocker] = [b for b in answer.blocked_by if "run 12" in b]
    assert "started at" in blocker and "by worker sleep@box" in blocker
    assert not any("reported its start" in b for b in answer.blocked_by)
    # the run by its number, the start of its Celery id beside it
    named = f"Latest run: run 12 (celery id {RUNNING.backend_id[:8]}\u2026) started"
    assert any(line.startswith(named) for line in answer.lines())
    assert answer.to_dict()["run"]["phase"] == "running"


def test_why_respawn_and_enable_change_nothing() -> None:
    now = at(1)
    respawn = why_unchanged("respawn", SCHEDULED, RUNNING, now)
    assert respawn.startswith("unchanged: the task has an open run: run 12 started at")
    assert "by worker sleep@box" in respawn
    assert "cancel it first (`swh scheduler task cancel 7`)" in respawn
    assert why_unchanged("run-now", SCHEDULED, QUEUED, now).startswith(
        "unchanged: the task has an open run: run 12 was dispatched at"
    )
    assert why_unchanged("delete", SCHEDULED, RUNNING, now).startswith(
        "unchanged: the task has an open run: run 12 started at"
    )
    enable = why_unchanged("enable", SCHEDULED, RUNNING, now)
    assert enable.startswith("unchanged: the task is not disabled, it is dispatched: run 12")
    waiting = make_task(status=TaskStatus.WAITING)
    assert why_unchanged("enable", waiting, None, now) == (
        "unchanged: the task is not disabled (status waiting): it runs from "
        "2024-06-03T12:00:00+00:00"
    )
    cancelled = make_task(status=TaskStatus.CANCELLED)
    assert "`swh scheduler task respawn 7` makes it runnable again" in why_unchanged(
        "enable", cancelled, None, now
    )
    completed = make_task(status=TaskStatus.COMPLETED)
    assert "completed one-shot" in why_unchanged("enable", completed, None, now)
    disabled = make_task(status=TaskStatus.DISABLED)
    assert why_unchanged("disable", disabled, None, now).startswith(
        "unchanged: the task is already disabled"
    )
    assert why_unchanged("cancel", cancelled, None, now) == (
        "unchanged: the task is already cancelled"
    )
