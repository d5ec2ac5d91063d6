"""The words of the domain that are plain values: schedule kinds, policies,
priorities, dispatch orders, task and run statuses, the catch-up policy, and
the checks the domain objects share (:mod:`.model` re-exports all of them).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum

from .exceptions import InvalidInput


class ScheduleKind(StrEnum):
    ONESHOT = "oneshot"
    PERIODIC = "periodic"
    CRON = "cron"
    ADAPTIVE = "adaptive"


class Policy(StrEnum):
    ONESHOT = "oneshot"
    RECURRING = "recurring"


class CatchUp(StrEnum):
    """What a runner does with the firings of a task missed while nothing ran
    (platform down, runner stopped, type paused) or left too late."""

    #: run once, late, at the first chance (what a task without the setting does)
    LATEST = "latest"
    #: drop the firings later than the grace period, record them as one
    #: ``skipped`` run, and wait for the next firing
    SKIP = "skip"


#: how late a firing may still run under :attr:`CatchUp.SKIP` when neither
#: the task nor its type says (``catch_up_grace``)
DEFAULT_CATCH_UP_GRACE = timedelta(minutes=5)


class Priority(StrEnum):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 for the class served first."""
        return _PRIORITY_RANK[self]


_PRIORITY_RANK = {Priority.HIGH: 0, Priority.NORMAL: 1, Priority.LOW: 2}
PRIORITY_ORDER: tuple[Priority, ...] = (Priority.HIGH, Priority.NORMAL, Priority.LOW)


class DispatchOrder(StrEnum):
    """The order in which a claim takes the ready tasks of one priority class."""

    #: earliest should_start_by first: the task closest to breaking its promise
    DEADLINE = "deadline"
    #: earliest can_start_by first (swh-scheduler's runner, Celery beat)
    FIFO = "fifo"
    #: a pseudo-random order, reproducible: drawn from the task's id and the
    #: instant of the claim
    RANDOM = "random"
    #: first the tasks due (late, or due within :data:`DUE_MARGIN`), those
    #: whose run buys the longest time before their next deadline first
    #: (one-shot tasks, which have no next deadline, before all); then the
    #: others in deadline order. While every task can be served in time it
    #: serves them as DEADLINE does; when not, the capacity goes to the tasks
    #: a run keeps OK the longest. Each claim sorts the tasks due
    TRIAGE = "triage"


#: the order of a runner unless told otherwise (``start-runner
#: --dispatch-order``). With the adaptive interval rules of the policy
#: engine (a late or first visit does not shrink an interval), DEADLINE
#: keeps as many tasks OK as TRIAGE under overload in ``swh scheduler
#: simulate`` and reads an index where TRIAGE sorts
RUNNER_ORDER = DispatchOrder.DEADLINE

#: how long before its should_start_by a task counts as due in the
#: :attr:`DispatchOrder.TRIAGE` order (a run dispatched then still has the
#: time to wait in its queue and to run)
DUE_MARGIN = timedelta(minutes=30)

#: How long a run is expected to last is its task's average good run, else
#: its ``expected_duration``, else its or its type's
#: ``max_expected_duration``. A worker slot a run takes cannot serve a task
#: falling due before it ends, so a runner that knows how many slots a
#: queue's workers have keeps :data:`RESERVED_SHARE` of them from **long
#: runs**: those that would hold a slot past the deadline of the earliest
#: shorter task waiting on the queue (:mod:`..dispatch.reserve`). What is
#: long is so decided each pass, never shorter than this (the wait an
#: overdue short task is allowed: with a minute, pages of a minute beside
#: an overdue ping counted as long and waited behind a wave of dumps):
LONG_RUN_FLOOR = timedelta(minutes=5)
#: ... and, when no task waiting on the queue could be helped by a kept
#: slot, this long: a run expected to last this long (or a last run that
#: failed after it) is long while shorter runs are in flight
LONG_RUN = timedelta(minutes=30)
#: the share of a queue's worker slots long runs may not take (rounded up,
#: at least one; none for a queue with a single slot)
RESERVED_SHARE = 0.25


class TaskStatus(StrEnum):
    WAITING = "waiting"  # may be dispatched once next_run has passed
    SCHEDULED = "scheduled"  # has an open run (dispatched or running)
    COMPLETED = "completed"  # one-shot task that ran to its end
    DISABLED = "disabled"  # taken out of scheduling by an operator or by retries
    CANCELLED = "cancelled"  # cancelled by a client

    @property
    def is_live(self) -> bool:
        return self in (TaskStatus.WAITING, TaskStatus.SCHEDULED)


class RunStatus(StrEnum):
    SCHEDULED = "scheduled"
    STARTED = "started"
    EVENTFUL = "eventful"
    UNEVENTFUL = "uneventful"
    FAILED = "failed"
    PERMFAILED = "permfailed"
    LOST = "lost"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    #: firings missed by more than the catch-up grace, dropped by a runner
    #: (``catch_up = skip``): never dispatched, recorded with the reason
    SKIPPED = "skipped"
    #: the body's end arrived after its run was taken from it (the process
    #: running the body went silent) and another copy of the task had
    #: started: its result is kept on the run, never applied to the task
    SUPERSEDED = "superseded"

    @property
    def is_open(self) -> bool:
        return self in (RunStatus.SCHEDULED, RunStatus.STARTED)

    @property
    def is_good(self) -> bool:
        return self in (RunStatus.EVENTFUL, RunStatus.UNEVENTFUL)


OPEN_RUN_STATUSES = (RunStatus.SCHEDULED, RunStatus.STARTED)
END_RUN_STATUSES = tuple(s for s in RunStatus if not s.is_open)


def final_run_status(status: RunStatus | str) -> RunStatus:
    """``status`` as a final run status; InvalidInput if a run cannot end with it."""
    try:
        value = RunStatus(status)
    except ValueError:
        raise InvalidInput("status", f"{status!r} is not a run status") from None
    if value.is_open:
        raise InvalidInput("status", f"{value} is not a final run status")
    if value is RunStatus.SKIPPED:
        raise InvalidInput("status", "only a runner records skipped firings; a run cannot end so")
    if value is RunStatus.SUPERSEDED:
        raise InvalidInput(
            "status",
            "only the store records a superseded end (a stale copy's); a run cannot end so",
        )
    return value


def check_aware(name: str, value: datetime | None) -> None:
    if value is None or value.tzinfo is UTC:  # (most are: the store reads them so)
        return
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(name, f"{value.isoformat()} has no time zone")


def check_duration(name: str, value: timedelta | None) -> None:
    if value is not None and value < timedelta(0):
        raise InvalidInput(name, f"{value} is negative; a duration must be >= 0")


def check_grace(value: timedelta | None) -> None:
    if value is not None and value <= timedelta(0):
        raise InvalidInput(
            "catch_up_grace", f"{value} must be longer than zero (how late a firing may run)"
        )


def catch_up_value(value: CatchUp | str | None) -> CatchUp | None:
    """``value`` as a :class:`CatchUp` (``None`` stays ``None``); InvalidInput naming
    ``catch_up`` otherwise."""
    if value is None or isinstance(value, CatchUp):
        return value
    try:
        return CatchUp(value)
    except ValueError:
        choices = ", ".join(c.value for c in CatchUp)
        raise InvalidInput("catch_up", f"{value!r} is not one of {choices}") from None
