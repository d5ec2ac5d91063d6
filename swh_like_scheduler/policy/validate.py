"""Creation-time rules for a task, and the initial scheduling state of a new task.

:func:`validate_task` raises :class:`InvalidInput` naming the offending field;
it checks what the model cannot check alone because it needs the task type or
schedule arithmetic:

* ``type`` — the task must belong to the given task type;
* cron: ``cron_max_duration`` > 0; ``cron`` must fire at all (``0 0 30 2 *`` never does);
* periodic: ``cooldown`` shorter than ``period`` (else the period can never be kept);
* adaptive: an interval (the task's or the type's ``default_interval``); a type
  with a ``backoff_factor`` also needs ``min_interval`` and ``max_interval``;
  the task's interval must lie within them;
* ``blackout_periods`` must leave some time of the day free;
* ``max_expected_duration`` not longer than ``max_allowed_duration``
  (the task's values, falling back on the type's);
* the retry budget of a recurring task (:func:`.retry.check_retry_budget`).

:func:`with_default_cooldown` gives a periodic task created without a
cooldown the default one (:func:`default_cooldown`): the store applies it
when it writes a new task, so every way in (CLI, API, remote store,
importer) gets the same rule. Such a task is marked
(``cooldown_is_default``): its cooldown follows its run time
(:func:`followed_cooldown`), at each good run that updates the average
duration (:mod:`.outcome`) and at each edit of its period or expected
duration (:mod:`.edit`); a cooldown a client gave, 0 included, never moves.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..domain.exceptions import InvalidInput
from ..domain.model import ScheduleKind, Task, TaskStatus, TaskType
from .blackout import covers_whole_day
from .cron import next_cron_time
from .retry import check_retry_budget, num_retries
from .schedule import start_times
from .times import ZERO, max_allowed_duration, max_expected_duration, reference_start

#: the share of its period that the default cooldown of a periodic task
#: leaves between can_start_by and should_start_by: the runner's room to
#: choose when the platform is busy
PERIODIC_WINDOW = 0.1


def default_cooldown(period: timedelta, expected: timedelta | None = None) -> timedelta:
    """The cooldown of a periodic task created without one: 90 % of the
    period, less twice the expected duration (the task's ``expected_duration``
    when given, else 0), never below 0.

    A run that started at s and lasted about ``expected`` (e) lets the next
    one start from s + e + cooldown = s + 0.9 x period - e, while it should
    start by s + period - e: an idle platform runs the task about once per
    period, and a tenth of the period is left for a busy one to find the
    time. (Without a cooldown the task may start again as soon as its last
    run ended.)
    """
    if period <= ZERO:
        raise InvalidInput("period", f"{period} must be longer than zero")
    expected = expected or ZERO
    cooldown = period * (1 - PERIODIC_WINDOW) - 2 * expected
    return max(ZERO, timedelta(microseconds=round(cooldown / timedelta(microseconds=1))))


def run_time_basis(
    expected: timedelta | None, average: timedelta | None = None
) -> timedelta | None:
    """The run time a default cooldown leaves room for: the larger of the
    task's ``expected_duration`` and its measured ``average_good_duration``
    (either may be unknown).

    The next run may start a cooldown after the last one *ended*, so the
    cooldown must leave room for the time runs really take (the average);
    its should_start_by is its period less the expected duration when one is
    given, else less the average. The larger of the two keeps both: with
    it the next run may start at least a tenth of the period before it
    should (:func:`default_cooldown`), whichever of them is right."""
    known = [d for d in (expected, average) if d is not None]
    return max(known) if known else None


def followed_cooldown(task: Task, average: timedelta | None = None) -> timedelta | None:
    """The default cooldown of ``task`` when its runs take ``average`` (its
    ``average_good_duration`` when not given); ``None`` when its cooldown is
    not the default one (a client gave it: it never moves) or it is not
    periodic."""
    if task.schedule_kind is not ScheduleKind.PERIODIC or not task.cooldown_is_default:
        return None
    if task.period is None:
        return None
    average = average if average is not None else task.average_good_duration
    return default_cooldown(task.period, run_time_basis(task.expected_duration, average))


def with_default_cooldown(task: Task) -> Task:
    """``task`` with the :func:`default_cooldown` when it is periodic and
    its cooldown was not given (``None``), marked as the default one; an
    explicit cooldown, 0 included, is kept."""
    if task.schedule_kind is not ScheduleKind.PERIODIC or task.cooldown is not None:
        return task
    assert task.period is not None
    basis = run_time_basis(task.expected_duration, task.average_good_duration)
    return task.updated(cooldown=default_cooldown(task.period, basis), cooldown_is_default=True)


def _check_cron(task: Task) -> None:
    if task.cron_max_duration is None or task.cron_max_duration <= ZERO:
        raise InvalidInput(
            "cron_max_duration", "must be longer than zero (time allowed after each firing)"
        )
    assert task.cron is not None
    next_cron_time(task.cron, task.tz, reference_start(task))


def _check_periodic(task: Task) -> None:
    assert task.period is not None
    if task.cooldown is not None and task.cooldown >= task.period:
        raise InvalidInput(
            "cooldown",
            f"{task.cooldown} is not shorter than the period {task.period}; the task could "
            "never run once per period",
        )


def _check_adaptive(task: Task, task_type: TaskType) -> None:
    interval = task.current_interval or task_type.default_interval
    if interval is None:
        raise InvalidInput(
            "current_interval",
            f"is required: task type {task_type.type!r} has no default_interval",
        )
    if task_type.backoff_factor is not None:
        for name in ("min_interval", "max_interval"):
            if getattr(task_type, name) is None:
                raise InvalidInput(
                    name,
                    f"task type {task_type.type!r} has a backoff_factor but no {name}; "
                    "an adaptive interval needs both bounds",
                )
    lo, hi = task_type.min_interval, task_type.max_interval
    if lo is not None and interval < lo:
        raise InvalidInput("current_interval", f"{interval} is shorter than min_interval {lo}")
    if hi is not None and interval > hi:
        raise InvalidInput("current_interval", f"{interval} is longer than max_interval {hi}")


def validate_task(task: Task, task_type: TaskType) -> None:
    """Run every creation-time rule (listed in the module doc); raise InvalidInput."""
    if task.type != task_type.type:
        raise InvalidInput("type", f"task is of type {task.type!r}, not {task_type.type!r}")
    kind = task.schedule_kind
    if kind is ScheduleKind.CRON:
        _check_cron(task)
    elif kind is ScheduleKind.PERIODIC:
        _check_periodic(task)
    elif kind is ScheduleKind.ADAPTIVE:
        _check_adaptive(task, task_type)
    if task.blackout_periods and covers_whole_day(task.blackout_periods):
        raise InvalidInput(
            "blackout_periods", "the windows cover the whole day; the task could never run"
        )
    expected = max_expected_duration(task, task_type)
    allowed = max_allowed_duration(task, task_type)
    if expected is not None and allowed is not None and expected > allowed:
        raise InvalidInput(
            "max_expected_duration", f"{expected} is longer than max_allowed_duration {allowed}"
        )
    check_retry_budget(task, task_type)


def prepare_new_task(task: Task, task_type: TaskType, now: datetime) -> Task:
    """A client-built task made ready to store: validated, statistics empty,
    ``created_at`` defaulting to ``now``, adaptive interval defaulting to the
    type's, retry budget full, and ``next_run``/``deadline`` from :func:`start_times`.
    """
    changes: dict[str, object] = {
        "status": TaskStatus.WAITING,
        "failure_count": 0,
        "retries_left": num_retries(task_type),
    }
    if task.created_at is None:
        changes["created_at"] = now
    if task.schedule_kind is ScheduleKind.ADAPTIVE and task.current_interval is None:
        changes["current_interval"] = task_type.default_interval
    changes = {k: v for k, v in changes.items() if getattr(task, k) != v}
    fresh = task.updated(**changes) if changes else task
    validate_task(fresh, task_type)
    times = start_times(fresh, task_type, now)
    return fresh.updated(next_run=times.can_start_by, deadline=times.should_start_by)
