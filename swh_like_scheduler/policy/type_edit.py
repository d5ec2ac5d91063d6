"""What an edit of a task type does to the tasks it governs.

A type's settings take part in its tasks' rules (:func:`.validate.validate_task`):
an adaptive interval lies within the type's bounds, the worst-case retry
time of its retry policy fits in each recurring task's period, a task's
expected duration is not longer than its allowed one (each falling back on
the type's). An edit that would make a task break a rule it kept is
refused, naming the setting the user gave; an adaptive task whose interval
falls outside new bounds is *moved* (its next interval is kept within
them, :func:`.capacity.clamp_interval`).

An edit of the settings a task's start times read (the retry policy, for a
task with failures in a row; the default interval, for an adaptive task
without one of its own) *retimes* the tasks whose times it changes: their
``next_run`` and ``deadline`` are computed again at once
(:func:`retimed`), as ``task update`` does for a task's own settings. The
runner dispatches a task from its stored ``next_run``, and ``task explain``
computes the times from the task and its type: times left as the old
settings gave them would have made the two disagree.

Tasks are judged by *shape*: the few columns these rules read, with how
many live or disabled tasks share them (the store counts them with one
GROUP BY), so the cost follows the number of distinct schedules, not of
tasks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..domain.exceptions import InvalidInput
from ..domain.model import ScheduleKind, Task, TaskType
from .capacity import clamp_interval
from .retry import retry_state
from .schedule import compute_start_times
from .times import fmt_duration, fmt_instant
from .validate import validate_task

#: a placeholder for what a shape does not carry (no rule of the type reads it)
_ANY_CRON_TIME = timedelta(minutes=1)


@dataclass(frozen=True)
class TaskShape:
    """The schedule columns the type's rules read, shared by ``count`` tasks
    (the smallest id is ``example``)."""

    schedule_kind: ScheduleKind
    count: int
    example: int
    current_interval: timedelta | None = None
    period: timedelta | None = None
    cron: str | None = None
    tz: str = "UTC"
    max_expected_duration: timedelta | None = None
    max_allowed_duration: timedelta | None = None

    def task(self, type_name: str, now: datetime) -> Task:
        """A task of this shape, created ``now`` (what the rules read)."""
        return Task(
            type=type_name,
            next_run=now,
            deadline=now,
            schedule_kind=self.schedule_kind,
            current_interval=self.current_interval,
            period=self.period,
            cron=self.cron,
            cron_max_duration=_ANY_CRON_TIME if self.cron is not None else None,
            tz=self.tz,
            max_expected_duration=self.max_expected_duration,
            max_allowed_duration=self.max_allowed_duration,
            created_at=now,
        )


@dataclass(frozen=True)
class TypeEditEffect:
    """``count`` tasks (e.g. ``example``) the edit breaks or moves: the task
    field concerned and what happens to them."""

    field: str
    count: int
    example: int
    detail: str


@dataclass(frozen=True)
class TypeEditReport:
    """What an edit of task type ``type`` (the settings ``given``) does to
    the ``tasks`` it governs (live or disabled)."""

    type: str
    given: tuple[str, ...]
    tasks: int
    #: rules kept before that the edit breaks: the edit is refused
    breaks: tuple[TypeEditEffect, ...] = ()
    #: adaptive intervals outside the new bounds: kept within them from the next run
    moves: tuple[TypeEditEffect, ...] = ()
    #: when the type has no task: why a new adaptive task on its default
    #: interval would be refused after the edit (a warning, not a refusal:
    #: the type may be meant for other kinds of tasks)
    new_tasks: str | None = None

    def refusal(self) -> InvalidInput | None:
        """The error that refuses the edit (naming the first setting given),
        or ``None`` when it breaks nothing."""
        if not self.breaks:
            return None
        field = self.given[0] if self.given else "type"
        first = self.breaks[0]
        more = f" (and {len(self.breaks) - 1} other rule(s))" if len(self.breaks) > 1 else ""
        broken = sum(b.count for b in self.breaks)
        return InvalidInput(
            field,
            f"would break {broken:,} of the {self.tasks:,} tasks of type {self.type!r}{more}: "
            f"{first.count:,} like task {first.example}, whose {first.field}: {first.detail}. "
            "Change those tasks first, or choose other values (--dry-run shows every effect)",
        )

    def lines(self) -> list[str]:
        """The report as the command line prints it."""
        out = [f"Task type {self.type}: {self.tasks:,} tasks (live or disabled)"]
        if not self.breaks and not self.moves:
            out.append("  no task breaks a rule or changes interval")
        for effect in self.breaks:
            out.append(
                f"  breaks {effect.count:,} (e.g. task {effect.example}): "
                f"{effect.field}: {effect.detail}"
            )
        for effect in self.moves:
            out.append(
                f"  moves {effect.count:,} (e.g. task {effect.example}): "
                f"{effect.field}: {effect.detail}"
            )
        if self.new_tasks is not None:
            out.append(f"  warning: a new adaptive task would be refused: {self.new_tasks}")
        return out


def _error(task: Task, task_type: TaskType) -> InvalidInput | None:
    try:
        validate_task(task, task_type)
    except InvalidInput as error:
        return error
    return None


def _moved(shape: TaskShape, current: TaskType, updated: TaskType) -> str | None:
    """How the edit moves an adaptive task's interval, or ``None``."""
    if shape.schedule_kind is not ScheduleKind.ADAPTIVE:
        return None
    interval = shape.current_interval or updated.default_interval
    if interval is None:
        return None
    clamped = clamp_interval(interval, updated)
    if clamped == interval or clamp_interval(interval, current) != interval:
        return None
    if clamped > interval:
        return f"below the new min_interval {fmt_duration(clamped)}: raised to it from its next run"
    return f"above the new max_interval {fmt_duration(clamped)}: lowered to it from its next run"


def assess_type_edit(
    current: TaskType,
    updated: TaskType,
    given: Iterable[str],
    shapes: Iterable[TaskShape],
    now: datetime,
) -> TypeEditReport:
    """What replacing ``current`` by ``updated`` does to tasks of ``shapes``.

    A shape breaks when it kept every rule under ``current`` and breaks one
    under ``updated`` (an adaptive interval outside the new bounds is
    judged as the interval it will be moved to). With no task at all, a
    new adaptive task on the type's default interval is judged instead,
    and what it would break is a warning (``new_tasks``), not a refusal."""
    breaks: dict[tuple[str, str], TypeEditEffect] = {}
    moves: dict[str, TypeEditEffect] = {}
    shapes = list(shapes)
    tasks = sum(s.count for s in shapes)
    judged = shapes or _default_shapes(current, updated)
    for shape in judged:
        moved = _moved(shape, current, updated)
        if moved is not None and shapes:
            effect = TypeEditEffect("current_interval", shape.count, shape.example, moved)
            _add(moves, moved, effect)
        before = _error(shape.task(current.type, now), current)
        if before is not None:
            continue  # already broken: not this edit's doing
        after_task = shape.task(updated.type, now)
        interval = after_task.current_interval
        if moved is not None and interval is not None:
            after_task = after_task.updated(current_interval=clamp_interval(interval, updated))
        after = _error(after_task, updated)
        if after is None:
            continue
        effect = TypeEditEffect(after.field, shape.count, shape.example, after.message)
        _add(breaks, (after.field, after.message), effect)
    # the most tasks first, then the smallest example: the same order whatever
    # order the shapes came in
    found = tuple(sorted(breaks.values(), key=_order))
    return TypeEditReport(
        type=current.type,
        given=tuple(given),
        tasks=tasks,
        breaks=found if shapes else (),
        moves=tuple(sorted(moves.values(), key=_order)),
        new_tasks=None if shapes or not found else f"{found[0].field}: {found[0].detail}",
    )


def _order(effect: TypeEditEffect) -> tuple[int, int]:
    return -effect.count, effect.example


def _add(found: dict[Any, TypeEditEffect], key: Any, effect: TypeEditEffect) -> None:
    seen = found.get(key)
    if seen is None:
        found[key] = effect
        return
    found[key] = TypeEditEffect(
        seen.field, seen.count + effect.count, min(seen.example, effect.example), seen.detail
    )


def _default_shapes(current: TaskType, updated: TaskType) -> list[TaskShape]:
    """A new adaptive task on the type's default interval, when it has one."""
    interval = updated.default_interval or current.default_interval
    if interval is None:
        return []
    return [TaskShape(ScheduleKind.ADAPTIVE, count=0, example=0, current_interval=interval)]


#: the retry settings of a type, which the start times of its tasks with
#: failures in a row read
RETRY_SETTINGS = ("num_retries", "retry_delay", "retry_growth", "retry_cap", "retry_jitter")


@dataclass(frozen=True)
class RetimeScope:
    """Which of a type's tasks an edit may retime: those with failures in a
    row (``failing``: a retry setting changed) and the adaptive ones without
    an interval of their own (``defaulted``: the default interval changed)."""

    failing: bool
    defaulted: bool


def retime_scope(current: TaskType, updated: TaskType) -> RetimeScope | None:
    """The tasks whose times replacing ``current`` by ``updated`` may change,
    or ``None`` when it changes no setting their times read."""
    failing = any(getattr(current, n) != getattr(updated, n) for n in RETRY_SETTINGS)
    defaulted = current.default_interval != updated.default_interval
    return RetimeScope(failing, defaulted) if failing or defaulted else None


def retimed(task: Task, current: TaskType, updated: TaskType, now: datetime) -> Task | None:
    """``task`` with the times ``updated`` gives it at ``now``, when they
    differ from those ``current`` gives it (``None``: the edit does not move
    it). Its ``retries_left`` follows the new retry policy. The times are
    the policy's (:func:`.schedule.compute_start_times`), read back from
    the task as stored: a retry's jitter stays where it was drawn, within
    the new window."""
    before = compute_start_times(task, current, now)
    after = compute_start_times(task, updated, now)
    changes: dict[str, Any] = {}
    if after.can_start_by != before.can_start_by:
        changes["next_run"] = after.can_start_by
    if after.should_start_by != before.should_start_by:
        changes["deadline"] = after.should_start_by
    if not changes:
        return None
    return task.updated(**changes, retries_left=retry_state(task, updated).retries_left)


def retime_effect(count: int, example: Task, moved: Task) -> TypeEditEffect:
    """The report of ``count`` tasks retimed, ``example`` (as it was) the
    first of them and ``moved`` what it becomes."""
    times = f"next_run {fmt_instant(example.next_run)} -> {fmt_instant(moved.next_run)}"
    if moved.deadline != example.deadline:
        times += f", deadline {fmt_instant(example.deadline)} -> {fmt_instant(moved.deadline)}"
    return TypeEditEffect(
        "next_run",
        count,
        example.id or 0,
        "its times depend on the settings changed (its retries after failures, or the "
        "default interval): computed again now, and the runner dispatches it by the new "
        f"ones (task {example.id}: {times})",
    )


def given_fields(changes: Mapping[str, Any]) -> tuple[str, ...]:
    """The settings an edit gives, in a stable order."""
    return tuple(sorted(changes))
