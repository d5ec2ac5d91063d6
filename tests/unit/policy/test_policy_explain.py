"""explain(): why a task is (not) running, as data and as text."""

from __future__ import annotations

import json
from datetime import timedelta

from policy_helpers import DAY, HOUR, MIN, at, make_task, make_type, window

from swh_like_scheduler.domain.model import ScheduleKind, TaskStatus
from swh_like_scheduler.policy import Condition, Reason, explain


def test_ready_task() -> None:
    task = make_task(last_good_start_at=at(-30), last_good_end_at=at(-29))
    answer = explain(task, make_type(), now=at(0))
    assert answer.ready
    assert answer.blocked_by == ()
    assert answer.condition.reason is Reason.STALE
    assert any(line.startswith("Ready:") for line in answer.lines())


def test_retry_and_blackout_are_explained() -> None:
    task = make_task(
        id=42,
        period=DAY,
        last_good_start_at=at(-20),
        last_good_end_at=at(-19),
        last_start_at=at(-1),
        last_end_at=at(0),
        failure_count=1,
        blackout_periods=(window("12:00", "13:00"),),
        next_run=at(1),  # as the store keeps it: the retry, out of the window
    )
    answer = explain(task, make_type(num_retries=3), now=at(0) + MIN)
    assert not answer.ready
    assert answer.can_start_by == at(1)
    assert [str(a.kind) for a in answer.adjustments] == ["retry_backoff", "blackout"]
    assert answer.condition.level is Condition.WARNING
    assert answer.condition.reason is Reason.LAST_RUN_FAILED
    assert any("may not start before" in reason for reason in answer.blocked_by)
    assert any("blackout" in reason for reason in answer.blocked_by)

    data = answer.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["task_id"] == 42
    assert data["condition"] == {
        "level": "WARNING",
        "reason": "last_run_failed",
        "detail": answer.condition.detail,
    }
    assert [a["kind"] for a in data["adjustments"]] == ["retry_backoff", "blackout"]
    assert data["can_start_by"] == at(1).isoformat()

    text = str(answer)
    assert "Task 42" in text
    assert "retry_backoff" in text and "blackout" in text
    assert "last_run_failed" in text
    assert "(in 59m)" in text


def test_running_disabled_and_cancelled_tasks() -> None:
    running = make_task(owner_started_at=at(0), owner_node="node-3", status=TaskStatus.SCHEDULED)
    answer = explain(running, make_type(), now=at(0.5))
    assert any("already running on node-3" in reason for reason in answer.blocked_by)

    disabled = make_task(status=TaskStatus.DISABLED)
    assert any("disabled" in reason for reason in explain(disabled, make_type(), at(0)).blocked_by)

    cancelled = make_task(ScheduleKind.ONESHOT, status=TaskStatus.CANCELLED)
    answer = explain(cancelled, make_type(), at(0))
    assert answer.condition.reason is Reason.CANCELLED
    assert not answer.ready


def test_cooldown_is_explained_and_node_constraints_shown() -> None:
    task = make_task(
        period=DAY,
        cooldown=2 * HOUR,
        last_good_start_at=at(-1),
        last_good_end_at=at(0),
        dont_run_on_nodes=("bad-node",),
        next_run=at(2),  # as the store keeps it: after the cooldown
    )
    answer = explain(task, make_type(), now=at(1))
    assert [str(a.kind) for a in answer.adjustments] == ["cooldown"]
    assert answer.dont_run_on_nodes == ("bad-node",)
    assert answer.to_dict()["dont_run_on_nodes"] == ["bad-node"]
    assert "Never runs on nodes: bad-node" in answer.lines()
    assert answer.to_dict()["ready"] is False


def test_readiness_is_read_from_the_stored_next_run_as_the_runner_reads_it() -> None:
    """A respawn or a "run now" stores an earlier next run than the
    schedule computes (a cooldown not over): the runner dispatches the task,
    so explain says it is ready, and why its times differ."""
    task = make_task(
        period=DAY,
        cooldown=2 * HOUR,
        last_good_start_at=at(-1),
        last_good_end_at=at(0),
        next_run=at(0.5),  # "run now" at 00:30
    )
    answer = explain(task, make_type(), now=at(1))
    assert answer.ready and answer.blocked_by == ()
    assert answer.can_start_by == at(0.5)
    assert "stored earliest start" in answer.basis and "respawn" in answer.basis
    # before it, not ready, and the stored time is the one given
    early = explain(task, make_type(), now=at(0.25))
    assert not early.ready
    assert any("may not start before" in r and "(in 15m)" in r for r in early.blocked_by)


def test_a_waiting_task_of_a_paused_type_is_not_ready() -> None:
    task = make_task(ScheduleKind.ONESHOT, next_run=at(0))
    result = explain(task, make_type(paused_at=at(1)), at(2))
    assert not result.ready
    assert result.blocked_by == (
        "its type is paused since 2024-06-03T13:00:00+00:00 "
        "(`task-type resume load-git` dispatches it again)",
    )
    assert "Its type has been paused since" in result.condition.detail
    assert explain(task, make_type(), at(2)).ready


def test_a_task_of_long_runs_is_said_to_wait_for_a_slot_others_are_not() -> None:
    said = make_task(expected_duration=2 * HOUR)
    answer = explain(said, make_type(), now=at(0))
    line = next(x for x in answer.lines() if x.startswith("Long run:"))
    assert "2h" in line and "(expected)" in line and "25 %" in line
    assert answer.to_dict()["long_run"] == line.removeprefix("Long run: ")
    # the measured average decides, as the runner's claim reads it
    measured = make_task(expected_duration=2 * HOUR, average_good_duration=timedelta(seconds=30))
    assert explain(measured, make_type(), now=at(0)).long_run == ""
    assert explain(measured, make_type(), now=at(0)).to_dict()["long_run"] is None
    grown = make_task(average_good_duration=10 * MIN)
    grown_note = explain(grown, make_type(), now=at(0)).long_run
    assert "(on average)" in grown_note and "earliest deadline" in grown_note
    assert not any(
        x.startswith("Long run:") for x in explain(make_task(), make_type(), now=at(0)).lines()
    )


def test_a_task_is_said_long_from_what_is_known_before_a_good_run() -> None:
    """As the runner's claim reads it (issue 61): without a good run, the
    task's ``max_expected_duration``, else its type's; a last run that
    failed after LONG_RUN_FLOOR or more, whatever the average."""
    typed = explain(make_task(), make_type(max_expected_duration=2 * HOUR), now=at(0))
    assert "2h (expected at most)" in typed.long_run
    assert "on its queue" in typed.long_run
    own = make_task(max_expected_duration=timedelta(seconds=30))
    assert explain(own, make_type(max_expected_duration=2 * HOUR), now=at(0)).long_run == ""
    hung = make_task(
        average_good_duration=timedelta(seconds=30),
        failure_count=1,
        last_start_at=at(-5),
        last_end_at=at(-1),
    )
    assert "its last run failed after 4h" in explain(hung, make_type(), now=at(0)).long_run
    recovered = make_task(
        average_good_duration=timedelta(seconds=30), last_start_at=at(-5), last_end_at=at(-1)
    )
    assert explain(recovered, make_type(), now=at(0)).long_run == ""
