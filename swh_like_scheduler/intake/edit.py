"""A task edited in place: its new fields checked as at creation, and its
can_start_by / should_start_by computed again for the new schedule from the
task's own history (its last good run, its failures), exactly as
:func:`.schedule.compute_start_times` computes them after a run.

So, for a waiting task:

* a new period or cooldown keeps the last good run as the anchor
  (can_start_by = its end + cooldown, should_start_by = its start + period
  - average duration); a default cooldown (``cooldown_is_default``:
  :func:`.validate.default_cooldown`) follows a new period or expected
  duration unless the edit gives one (a cooldown given is the client's from
  then on), and a task made periodic without a cooldown gets the default;
* a new cron expression, zone or ``cron_max_duration`` gives the first
  firing of the new expression after the last good run's start (after the
  creation for a task that never succeeded) — a firing of the new
  expression that fell between then and now is due at once, like any missed
  firing;
* a new adaptive interval counts from the end of the last good run;
* a one-shot task keeps the instant it was asked for; a new ``max_delay``
  moves its should_start_by only; a recurring task made one-shot runs once
  at its current can_start_by;
* a task awaiting a retry keeps waiting for it (``reset_retries``: not).

A task that a run holds keeps its times: the outcome of that run computes
them with the new values (:mod:`..editing` says which fields may change
then). The status never changes (``enable``, ``respawn`` do that).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..domain.exceptions import InvalidInput, TaskBusy
from ..domain.model import (
    OWNER_CLEARED,
    SCHEDULE_ALLOWED,
    SCHEDULE_PARAMETERS,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
)
from ..policy.cron import default_cron_max_duration
from ..policy.retry import retry_state
from ..policy.schedule import compute_start_times
from ..policy.times import ZERO, never_attempted, oneshot_instant, to_utc
from ..policy.validate import default_cooldown, run_time_basis, validate_task
from .editing import TASK_EDITABLE, Applies, task_field


def held(task: Task) -> bool:
    """Whether a run holds ``task`` (dispatched or running, or a lease owner)."""
    return task.status is TaskStatus.SCHEDULED or any(
        getattr(task, name) is not None for name in OWNER_CLEARED
    )


def edited_task(task: Task, task_type: TaskType, changes: Mapping[str, Any], now: datetime) -> Task:
    """``task`` with ``changes`` (field → value, as :func:`..editing.task_changes`
    gives them), checked as at creation, its times computed again (rules in
    the module doc). Raises InvalidInput naming the field, and
    :class:`TaskBusy` for a change that cannot apply while a run holds it."""
    now = to_utc(now)
    for name in changes:
        task_field(name)  # only editable fields, by their own names
        if name in ("failure_count",) and changes[name] != 0:
            raise InvalidInput("reset_retries", "failure_count can only be set back to 0")
    wanted = {k: v for k, v in changes.items() if getattr(task, k) != v}
    if held(task):
        for name in wanted:
            if TASK_EDITABLE[name] is Applies.IDLE:
                raise TaskBusy(
                    name,
                    f"cannot change while a run holds task {task.id} (status {task.status}"
                    f"{', running' if task.owner_started_at is not None else ''}): the open "
                    "run was dispatched with the current value. Edit it once the run has "
                    "ended, or cancel the task's run first",
                )
    kind = wanted.get("schedule_kind", task.schedule_kind)
    if kind is not task.schedule_kind:
        wanted.update(_new_kind(task, task_type, kind, wanted, now))
    elif kind is ScheduleKind.ONESHOT and "max_delay" in wanted and not never_attempted(task):
        # after an attempt the instant asked for is read back from the deadline
        wanted["deadline"] = oneshot_instant(task) + (wanted["max_delay"] or ZERO)
    wanted.update(_cooldown_follows(task, kind, changes, wanted))
    if not wanted:
        return task
    after = task.updated(**wanted)
    validate_task(after, task_type)
    after = after.updated(retries_left=retry_state(after, task_type).retries_left)
    if held(task):
        return after
    times = compute_start_times(after, task_type, now)
    return after.updated(next_run=times.can_start_by, deadline=times.should_start_by)


def _cooldown_follows(
    task: Task, kind: ScheduleKind, changes: Mapping[str, Any], wanted: Mapping[str, Any]
) -> dict[str, Any]:
    """The periodic default cooldown, again, when the edit changes what it
    derives from and gives no cooldown: a task made periodic gets it (and
    the mark ``cooldown_is_default``); a task whose cooldown is the default
    one gets the default of its new period or expected duration (and of
    its average run time, :func:`.validate.run_time_basis`). A cooldown the
    edit gives, even the value it has, is the client's from then on; a
    cooldown a client gave is kept."""
    if kind is not ScheduleKind.PERIODIC or "cooldown" in changes:
        # a cooldown given, or none at all (another kind): not the default
        return {"cooldown_is_default": False} if task.cooldown_is_default else {}
    period = wanted.get("period", task.period)
    expected = wanted.get("expected_duration", task.expected_duration)
    if period is None:
        return {}
    new = default_cooldown(period, run_time_basis(expected, task.average_good_duration))
    if task.schedule_kind is not ScheduleKind.PERIODIC:
        return {"cooldown": new, "cooldown_is_default": True}
    if not task.cooldown_is_default or not ({"period", "expected_duration"} & set(wanted)):
        return {}
    return {"cooldown": new} if new != task.cooldown else {}


def _new_kind(
    task: Task,
    task_type: TaskType,
    kind: ScheduleKind,
    wanted: Mapping[str, Any],
    now: datetime,
) -> dict[str, Any]:
    """What changing the schedule kind to ``kind`` also changes: the other
    kinds' parameters cleared, defaults for the new one's."""
    extra: dict[str, Any] = {
        name: None
        for name in SCHEDULE_PARAMETERS
        if name not in SCHEDULE_ALLOWED[kind]
        and name not in wanted
        and getattr(task, name) is not None
    }
    if kind is ScheduleKind.ADAPTIVE and wanted.get("current_interval") is None:
        extra["current_interval"] = task.current_interval or task_type.default_interval
    if kind is ScheduleKind.CRON and wanted.get("cron") and not wanted.get("cron_max_duration"):
        fields = {
            "cron": wanted["cron"],
            "tz": wanted.get("tz", task.tz),
            "max_allowed_duration": wanted.get("max_allowed_duration", task.max_allowed_duration),
        }
        extra["cron_max_duration"] = default_cron_max_duration(fields, task_type, now)
    if kind is ScheduleKind.ONESHOT:
        # run once, at the can_start_by it had
        at = oneshot_instant(task) if task.schedule_kind is kind else to_utc(task.next_run)
        extra["next_run"] = at
        extra["deadline"] = at + (wanted.get("max_delay") or ZERO)
    return extra
