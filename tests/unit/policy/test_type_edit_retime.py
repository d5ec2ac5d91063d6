"""Which tasks an edit of their type retimes, and to what
(:func:`policy.type_edit.retimed`): the times the new settings give, so that
what ``task explain`` computes is the stored ``next_run`` the runner reads."""

from __future__ import annotations

from policy_helpers import DAY, HOUR, MIN, T0, at, make_task, make_type

from swh_like_scheduler.domain.model import RunStatus, Task
from swh_like_scheduler.policy import apply_outcome
from swh_like_scheduler.policy.outcome import Outcome
from swh_like_scheduler.policy.schedule import start_times
from swh_like_scheduler.policy.type_edit import retime_effect, retime_scope, retimed

JITTERED = make_type(num_retries=2, retry_delay=30 * MIN, retry_growth=1.0, retry_jitter=10 * MIN)


def failed_once() -> Task:
    task = make_task(period=DAY, next_run=T0)
    outcome = Outcome(RunStatus.FAILED, ended=at(1), started=T0, slot=T0)
    return apply_outcome(task, JITTERED, outcome, rng=lambda: 0.5)


def test_only_the_settings_the_times_read_open_a_scope() -> None:
    assert retime_scope(JITTERED, JITTERED.updated(description="x", max_queue_length=3)) is None
    scope = retime_scope(JITTERED, JITTERED.updated(retry_cap=HOUR))
    assert scope is not None and (scope.failing, scope.defaulted) == (True, False)
    scope = retime_scope(JITTERED, JITTERED.updated(default_interval=HOUR))
    assert scope is not None and (scope.failing, scope.defaulted) == (False, True)


def test_a_task_awaiting_a_retry_is_retimed_to_what_the_new_settings_give() -> None:
    task = failed_once()
    assert task.next_run == at(1) + 35 * MIN  # 30 min + half the 10 min jitter
    shorter = JITTERED.updated(retry_delay=10 * MIN)
    moved = retimed(task, JITTERED, shorter, at(1))
    assert moved is not None
    # the jitter drawn stays within the new window: its end, 10 + 10 min
    assert moved.next_run == at(1) + 20 * MIN and moved.deadline == task.deadline
    assert moved.next_run == start_times(moved, shorter, at(2)).can_start_by
    none = JITTERED.updated(num_retries=None)
    back = retimed(task, JITTERED, none, at(1))
    assert back is not None and back.retries_left == 0
    assert back.next_run == T0 + DAY  # its next regular run after the failed start
    effect = retime_effect(1, task, back)
    assert (effect.field, effect.count, effect.example) == ("next_run", 1, task.id)


def test_an_edit_that_leaves_its_times_as_they_were_retimes_nothing() -> None:
    task = failed_once()
    # a longer jitter keeps the retry drawn inside its window
    assert retimed(task, JITTERED, JITTERED.updated(retry_jitter=20 * MIN), at(1)) is None
    calm = make_task(period=DAY, next_run=T0)
    assert retimed(calm, JITTERED, JITTERED.updated(num_retries=None), at(1)) is None
