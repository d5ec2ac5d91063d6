"""Contract: long runs (expected to last LONG_RUN, or what a pass says, or
more) counted in flight, shorter tasks due soon or in flight, the slack of
the task a kept slot helps, and claims that leave long tasks waiting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.enums import LONG_RUN
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import (
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.policy.outcome import Outcome, apply_outcome

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)


@pytest.fixture
def long_type(store: Any) -> TaskType:
    made: TaskType = store.create_task_type(TaskType(type="mixed", backend_name="x.mixed"))
    return made


def make(store: Any, n: int, *, next_run: datetime = T0 - M, **fields: Any) -> Task:
    values: dict[str, Any] = {"next_run": next_run, "deadline": next_run}
    values.update(fields)
    [task] = store.create_tasks(
        [Task(type="mixed", args=(n,), schedule_kind=ScheduleKind.ONESHOT, **values)],
        now=T0 - H,
    )
    return task


def test_a_claim_short_only_leaves_the_long_tasks_waiting(store: Any, long_type: TaskType) -> None:
    dump = make(store, 1, expected_duration=2 * H, next_run=T0 - 2 * M)
    edge = make(store, 2, expected_duration=LONG_RUN, next_run=T0 - 2 * M)
    ping = make(store, 3, expected_duration=S)
    unknown = make(store, 4)
    assert store.ready_task_ids("mixed", now=T0, limit=10, short_only=True) == [
        ping.id,
        unknown.id,
    ]
    taken = store.claim_ready_tasks("mixed", now=T0, limit=10, short_only=True)
    assert sorted(c.task_id for c in taken) == sorted([ping.id, unknown.id])
    # without it, the long ones go as any other (deadline order)
    rest = store.claim_ready_tasks("mixed", now=T0, limit=10)
    assert [c.task_id for c in rest] == sorted([dump.id, edge.id])


def test_the_measured_average_decides_before_the_expected_duration(
    store: Any, long_type: TaskType
) -> None:
    said_long = make(store, 1, expected_duration=2 * H)
    store.update_task(said_long.updated(average_good_duration=10 * S))
    said_short = make(store, 2, expected_duration=10 * S)
    store.update_task(said_short.updated(average_good_duration=LONG_RUN + S))
    taken = store.claim_ready_tasks("mixed", now=T0, limit=10, short_only=True)
    assert [c.task_id for c in taken] == [said_long.id]


def test_long_runs_in_flight_and_shorter_tasks_due_are_counted(
    store: Any, long_type: TaskType
) -> None:
    nothing = store.long_runs("mixed", now=T0, within=LONG_RUN)
    assert (nothing.in_flight, nothing.short_due) == (0, False)
    for n in range(3):
        make(store, n, expected_duration=2 * H)
    # long tasks only, even ready ones: no shorter task to keep slots for
    assert store.long_runs("mixed", now=T0, within=LONG_RUN).short_due is False
    assert len(store.claim_ready_tasks("mixed", now=T0, limit=2)) == 2
    runs = store.long_runs("mixed", now=T0, within=LONG_RUN)
    assert (runs.in_flight, runs.short_due) == (2, False)
    # a short task due after the horizon does not count; one within it does,
    # in any class
    make(store, 10, expected_duration=M, next_run=T0 + LONG_RUN + M)
    assert store.long_runs("mixed", now=T0, within=LONG_RUN).short_due is False
    make(store, 11, next_run=T0 + LONG_RUN - M, priority=Priority.LOW)
    runs = store.long_runs("mixed", now=T0, within=LONG_RUN)
    assert (runs.in_flight, runs.short_due) == (2, True)
    # a claimed short task is in flight, but not a long run
    store.claim_ready_tasks("mixed", now=T0 + LONG_RUN, limit=10, short_only=True)
    assert store.long_runs("mixed", now=T0 + LONG_RUN, within=LONG_RUN).in_flight == 2
    assert store.long_runs("other", now=T0, within=LONG_RUN).in_flight == 0


def test_a_naive_instant_or_a_negative_horizon_is_refused(store: Any, long_type: TaskType) -> None:
    with pytest.raises(InvalidInput, match=r"now|UTC offset"):
        store.long_runs("mixed", now=datetime(2026, 3, 2), within=LONG_RUN)
    with pytest.raises(InvalidInput, match="within"):
        store.long_runs("mixed", now=T0, within=-S)


def _ended(store: Any, task: Task, status: RunStatus, started: datetime, ended: datetime) -> Task:
    """``task`` as its run of ``started`` to ``ended`` with ``status``
    leaves it (the listener's rules: :func:`apply_outcome`), waiting again."""
    task_type = store.get_task_type(task.type)
    after = apply_outcome(task, task_type, Outcome(status, ended, started), rng=lambda: 0.5)
    changed: Task = store.update_task(after.updated(status=TaskStatus.WAITING, next_run=T0 - M))
    return changed


def test_what_is_known_before_a_good_run_makes_a_task_long(store: Any) -> None:
    """Issue 61. Without a good run, a task is long when its own
    ``max_expected_duration`` says so, else its type's: ``own`` (1 h of its
    own, in a type saying 10 s) and ``typed`` (nothing of its own, in a
    type saying 2 h) are long; ``unknown`` (nothing said anywhere) and
    ``said_short`` (its own 10 min in the 2-h type) are not. A good average
    decides before all of these: ``measured`` (10 s on average, type 2 h)
    is short."""
    store.create_task_type(TaskType(type="dumps", backend_name="x.d", max_expected_duration=2 * H))
    store.create_task_type(TaskType(type="quick", backend_name="x.q", max_expected_duration=10 * S))

    def task(kind: str, n: int, **fields: Any) -> Task:
        [made] = store.create_tasks(
            [
                Task(
                    type=kind,
                    args=(n,),
                    schedule_kind=ScheduleKind.ONESHOT,
                    next_run=T0 - M,
                    deadline=T0 - M,
                    **fields,
                )
            ],
            now=T0 - H,
        )
        return made

    typed = task("dumps", 1)
    said_short = task("dumps", 2, max_expected_duration=10 * M)
    measured = task("dumps", 3)
    store.update_task(measured.updated(average_good_duration=10 * S))
    own = task("quick", 4, max_expected_duration=H)
    unknown_type = store.create_task_type(TaskType(type="blank", backend_name="x.b"))
    unknown = task(unknown_type.type, 5)
    short = {c.task_id for c in store.claim_ready_tasks("dumps", now=T0, limit=9, short_only=True)}
    assert short == {said_short.id, measured.id}
    assert store.claim_ready_tasks("quick", now=T0, limit=9, short_only=True) == []
    assert len(store.claim_ready_tasks("blank", now=T0, limit=9, short_only=True)) == 1
    assert typed.id is not None and own.id is not None and unknown.id is not None
    # the long ones, claimed, are long runs in flight
    store.claim_ready_tasks("dumps", now=T0, limit=9)
    store.claim_ready_tasks("quick", now=T0, limit=9)
    assert store.long_runs("dumps", now=T0, within=LONG_RUN).in_flight == 1
    assert store.long_runs("quick", now=T0, within=LONG_RUN).in_flight == 1
    assert store.long_runs("blank", now=T0, within=LONG_RUN).in_flight == 0


def test_a_run_that_failed_after_a_long_run_makes_its_task_long(
    store: Any, long_type: TaskType
) -> None:
    """Issue 61. ``hung`` (a 10 s average) last timed out after 4 h: its
    retry is a long run. ``quick_fail`` failed after 10 s, and ``recovered``
    timed out after 4 h but has run well since: neither is long."""
    hung = make(store, 1, expected_duration=10 * S)
    quick_fail = make(store, 2, expected_duration=10 * S)
    recovered = make(store, 3, expected_duration=10 * S)
    four_hours_ago = T0 - 5 * H
    hung = _ended(store, hung, RunStatus.TIMED_OUT, four_hours_ago, four_hours_ago + 4 * H)
    quick_fail = _ended(store, quick_fail, RunStatus.FAILED, T0 - 2 * M, T0 - 2 * M + 10 * S)
    recovered = _ended(
        store, recovered, RunStatus.TIMED_OUT, four_hours_ago, four_hours_ago + 4 * H
    )
    recovered = _ended(store, recovered, RunStatus.EVENTFUL, T0 - 2 * M, T0 - 2 * M + 10 * S)
    assert (hung.failure_count, recovered.failure_count) == (1, 0)
    short = store.claim_ready_tasks("mixed", now=T0, limit=9, short_only=True)
    assert sorted(c.task_id for c in short) == sorted([quick_fail.id, recovered.id])
    store.claim_ready_tasks("mixed", now=T0, limit=9)
    assert store.long_runs("mixed", now=T0, within=LONG_RUN).in_flight == 1


def test_what_is_long_is_given_with_the_claim(store: Any, long_type: TaskType) -> None:
    """The same tasks, long or not by the length a pass gives: a 27-minute
    job is a long run beside a task due in ten minutes (``long_run`` 10
    min), not beside one due in an hour; a task whose last run failed after
    20 min is long at 10 min, not at 30 (the default)."""
    job = make(store, 1, expected_duration=27 * M, next_run=T0 - 2 * M)
    ping = make(store, 2, expected_duration=S)
    failed = make(store, 3, expected_duration=10 * S)
    failed = _ended(store, failed, RunStatus.TIMED_OUT, T0 - H, T0 - H + 20 * M)
    ten = {
        c for c in store.ready_task_ids("mixed", now=T0, limit=9, short_only=True, long_run=10 * M)
    }
    assert ten == {ping.id}
    default = set(store.ready_task_ids("mixed", now=T0, limit=9, short_only=True))
    assert default == {job.id, ping.id, failed.id}
    taken = store.claim_ready_tasks("mixed", now=T0, limit=9, short_only=True, long_run=10 * M)
    assert [c.task_id for c in taken] == [ping.id]
    store.claim_ready_tasks("mixed", now=T0, limit=9)
    assert store.long_runs("mixed", now=T0, within=M, long_run=10 * M).in_flight == 2
    runs = store.long_runs("mixed", now=T0, within=M)
    assert (runs.in_flight, runs.short_in_flight) == (0, True)
    with pytest.raises(InvalidInput, match="long_run"):
        store.long_runs("mixed", now=T0, within=M, long_run=timedelta(0))


def test_the_slack_of_the_earliest_deadline_a_kept_slot_helps(
    store: Any, long_type: TaskType
) -> None:
    """Worked by hand, at T0 with the floor of 5 min. Waiting: a two-hour
    dump due since a minute, deadline in 10 min (it cannot make it: not
    helped), a ping of 1 s due in 45 min with its deadline in an hour, a
    task of unknown length due tomorrow: the earliest helped is the ping,
    whose slack is 1 h. A 6-min job 2 min overdue is not helped (6 min is
    not under max(-2 min, 5 min)); a 10-s task 3 min overdue is: -3 min.
    Claimed, it no longer waits: 1 h again. A floor of 7 min helps the
    6-min job: -2 min."""
    make(store, 1, expected_duration=2 * H, next_run=T0 - M, deadline=T0 + 10 * M)
    make(store, 2, expected_duration=S, next_run=T0 + 45 * M, deadline=T0 + H)
    make(store, 3, next_run=T0 + 24 * H)
    assert store.short_slack("mixed", now=T0) == H
    make(store, 4, expected_duration=6 * M, next_run=T0 - 10 * M, deadline=T0 - 2 * M)
    assert store.short_slack("mixed", now=T0) == H
    late = make(store, 5, expected_duration=10 * S, next_run=T0 - 4 * M, deadline=T0 - 3 * M)
    assert store.short_slack("mixed", now=T0) == -3 * M
    store.claim_ready_tasks("mixed", now=T0, limit=9, among=[late.id])
    assert store.short_slack("mixed", now=T0) == H
    assert store.short_slack("mixed", now=T0, floor=7 * M) == -2 * M
    assert store.short_slack("other", now=T0) is None
    with pytest.raises(InvalidInput, match=r"now|UTC offset"):
        store.short_slack("mixed", now=datetime(2026, 3, 2))
    with pytest.raises(InvalidInput, match="floor"):
        store.short_slack("mixed", now=T0, floor=-S)
