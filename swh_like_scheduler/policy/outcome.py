"""Applying the outcome of a run to its task: statistics, interval, retries, status.

Outcomes fall in three families:

* good (``eventful``, ``uneventful``): ``failure_count`` back to 0, retry
  budget refilled, ``last_good_*`` set, the duration folded into the EWMA when
  the start is known (and a periodic task's default cooldown set again for
  the new average: :func:`.validate.followed_cooldown`; a cooldown a client
  gave stays), an adaptive interval adapted (see
  :func:`.capacity.adapt_interval`;
  not on a task's first good run, which has no earlier visit to compare
  with), a one-shot completed;
* failed (``failed``, ``permfailed``, ``timed_out``): ``failure_count`` + 1
  and the retry position advanced (see :mod:`.retry`); ``permfailed``
  disables the task, and so does exhausting a one-shot task's retries;
* neutral (``lost``, ``cancelled``): the run's fate says nothing about the
  task (its worker vanished, or it was revoked), so no statistic moves and
  the task may run again as its schedule says. Only ``last_end_at`` records
  that something ended, which keeps duplicates detectable (and, while a retry
  is awaited, restarts that retry's wait from this end).

Every outcome releases the lease ownership fields and recomputes ``next_run``
and ``deadline`` with :func:`.schedule.compute_start_times` at the run's end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..domain.exceptions import InvalidInput
from ..domain.model import OWNER_CLEARED, RunStatus, ScheduleKind, Task, TaskStatus, TaskType
from .capacity import adapt_interval
from .retry import RandomSource, draw, num_retries, retry_state
from .schedule import compute_start_times, interval_of
from .times import to_utc
from .validate import followed_cooldown

#: Weight of the last run in the average duration (about 75 % on the last three runs).
EWMA_ALPHA = 0.37

GOOD_STATUSES = frozenset({RunStatus.EVENTFUL, RunStatus.UNEVENTFUL})
FAILED_STATUSES = frozenset({RunStatus.FAILED, RunStatus.PERMFAILED, RunStatus.TIMED_OUT})
#: the statuses a return value may name (``{"status": ...}``), by name
_RESULT_STATUSES: Mapping[Any, RunStatus] = {
    s.value: s
    for s in (RunStatus.EVENTFUL, RunStatus.UNEVENTFUL, RunStatus.FAILED, RunStatus.PERMFAILED)
}
NEUTRAL_STATUSES = frozenset({RunStatus.LOST, RunStatus.CANCELLED})


@dataclass(frozen=True)
class Outcome:
    """How one run ended.

    ``status`` is a final run status; ``ended`` when it ended; ``started`` when
    it started, if known. ``slot`` (the can_start_by the run was claimed for)
    and ``backend_id`` (the Celery task id) identify the run for callers that
    keep a log of applied outcomes.
    """

    status: RunStatus
    ended: datetime
    started: datetime | None = None
    slot: datetime | None = None
    backend_id: str | None = None

    def __post_init__(self) -> None:
        try:
            status = RunStatus(self.status)
        except ValueError:
            raise InvalidInput("status", f"{self.status!r} is not a run status") from None
        if status.is_open:
            raise InvalidInput("status", f"{status} is not a final run status")
        object.__setattr__(self, "status", status)
        for name in ("ended", "started", "slot"):
            value = getattr(self, name)
            if value is not None and (value.tzinfo is None or value.utcoffset() is None):
                raise InvalidInput(name, f"{value.isoformat()} has no time zone")
        if self.started is not None and self.started > self.ended:
            raise InvalidInput(
                "started", f"{self.started.isoformat()} is after ended {self.ended.isoformat()}"
            )

    @property
    def key(self) -> str:
        """A stable identity for this run's outcome, for a log of applied outcomes:
        the ``backend_id`` when known, else the slot and end instants."""
        if self.backend_id:
            return self.backend_id
        slot = to_utc(self.slot).isoformat() if self.slot is not None else "-"
        return f"{slot}/{to_utc(self.ended).isoformat()}"

    @property
    def is_good(self) -> bool:
        return self.status in GOOD_STATUSES

    @property
    def is_failure(self) -> bool:
        return self.status in FAILED_STATUSES


def classify_result(result: Any) -> RunStatus:
    """The run status a worker's return value stands for.

    A mapping with ``status`` in eventful/uneventful/failed/permfailed gives
    that status; any other value is eventful when truthy, uneventful when not.
    Raises InvalidInput('status') for a mapping with an unknown status.
    """
    if (type(result) is dict or isinstance(result, Mapping)) and "status" in result:
        status = result["status"]
        try:
            return _RESULT_STATUSES[status]
        except (KeyError, TypeError):  # (TypeError: a status that is not hashable)
            pass
        choices = ", ".join(sorted(_RESULT_STATUSES))
        raise InvalidInput("status", f"{status!r} is not one of {choices}")
    return RunStatus.EVENTFUL if result else RunStatus.UNEVENTFUL


def ewma(previous: timedelta | None, last: timedelta, alpha: float = EWMA_ALPHA) -> timedelta:
    """``alpha * last + (1 - alpha) * previous``; ``last`` alone when there is no history."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha {alpha!r} is not in (0, 1]")
    if previous is None:
        return last
    return last * alpha + previous * (1.0 - alpha)


def already_applied(task: Task, outcome: Outcome) -> bool:
    """Whether ``outcome`` is already reflected in ``task`` (or superseded by a later one).

    Every applied outcome sets ``last_end_at`` to its end, so an outcome that
    ended at or before ``last_end_at`` is a duplicate or arrived out of order.
    The store's run row (final status written once per ``backend_id``) remains
    the primary guard; this is the check that needs only the task.
    """
    return task.last_end_at is not None and to_utc(outcome.ended) <= to_utc(task.last_end_at)


def _next_status(task: Task, outcome: Outcome, *, exhausted: bool) -> TaskStatus:
    current = task.status
    if current in (TaskStatus.CANCELLED, TaskStatus.COMPLETED):
        return current
    oneshot = task.schedule_kind is ScheduleKind.ONESHOT
    if outcome.is_good and oneshot:
        return TaskStatus.COMPLETED
    if outcome.status is RunStatus.PERMFAILED or (outcome.is_failure and oneshot and exhausted):
        return TaskStatus.DISABLED
    if current is TaskStatus.DISABLED:
        return current
    return TaskStatus.WAITING


def apply_outcome(
    task: Task,
    task_type: TaskType,
    outcome: Outcome,
    *,
    rng: RandomSource,
    alpha: float = EWMA_ALPHA,
) -> Task:
    """The task as it is after ``outcome`` (rules in the module doc).

    ``rng`` draws the retry jitter (a ``random.Random``-like object or a
    callable returning a float in [0, 1]); it is used only when a retry is
    awaited and the type has a jitter. Applying an outcome for which
    :func:`already_applied` is true would count it twice: callers check first.
    """
    ended = to_utc(outcome.ended)
    known_start = outcome.started or task.owner_started_at
    if known_start is not None and to_utc(known_start) > ended:
        known_start = None
    started = to_utc(known_start) if known_start is not None else ended
    changes: dict[str, Any] = {
        "last_end_at": ended,
        **OWNER_CLEARED,
    }
    if outcome.is_good:
        changes.update(
            failure_count=0,
            retries_left=num_retries(task_type),
            last_start_at=started,
            last_good_start_at=started,
            last_good_end_at=ended,
        )
        if known_start is not None:
            average = ewma(task.average_good_duration, ended - started, alpha)
            changes["average_good_duration"] = average
            cooldown = followed_cooldown(task, average)
            if cooldown is not None and cooldown != task.cooldown:
                # a default cooldown follows the run time: the times below use it
                changes["cooldown"] = cooldown
        previous = task.last_good_start_at
        if task.schedule_kind is ScheduleKind.ADAPTIVE and previous is not None:
            # a first good run finds everything new: it says nothing of how
            # often the source changes, so the interval stays as it is
            changes["current_interval"] = adapt_interval(
                interval_of(task, task_type),
                task_type,
                eventful=outcome.status is RunStatus.EVENTFUL,
                gap=started - to_utc(previous),
                now=ended,
            )
    elif outcome.is_failure:
        changes.update(failure_count=task.failure_count + 1, last_start_at=started)
    after = task.updated(**changes)
    state = retry_state(after, task_type)
    # set with the next times below (one copy of the task less per outcome):
    # the start times depend on neither
    last: dict[str, Any] = {"status": _next_status(task, outcome, exhausted=state.exhausted)}
    if outcome.is_failure:
        last["retries_left"] = state.retries_left
    fraction: float | None = None
    if state.retry is not None and task_type.retry_jitter > timedelta(0):
        fraction = draw(rng)
    times = compute_start_times(after, task_type, ended, retry_jitter_fraction=fraction)
    next_run = times.can_start_by
    if outcome.slot is not None and next_run <= to_utc(outcome.slot):
        # a slot is dispatched once (runs are unique per task and slot): after a
        # neutral end (lost, cancelled) the task may run again at once, but in a
        # new slot, strictly after the one that just ended
        next_run = max(ended, to_utc(outcome.slot) + timedelta(microseconds=1))
    return after.updated(**last, next_run=next_run, deadline=times.should_start_by)
