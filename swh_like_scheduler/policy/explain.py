"""Why is my task (not) running? A structured, printable answer.

:func:`explain` gathers can_start_by and should_start_by (people read them
as the *earliest start* and the *latest start*), the condition and every
adjustment (cooldown, retry back-off, retries exhausted, blackout), its
catch-up policy and the missed firings it skipped or is about to skip, a
periodic task's cooldown (the default one, or a client's; a warning when it
makes every run late: :mod:`.cooldown`), and lists what currently keeps the
task from being dispatched. ``lines()`` writes its instants with
:func:`.times.fmt_instant`: in the reader's zone when one is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..domain.enums import LONG_RUN_FLOOR, RESERVED_SHARE
from ..domain.model import CatchUp, ScheduleKind, Task, TaskRun, TaskStatus, TaskType
from ..domain.text import headline, plural, run_name
from .blackout import blackout_at, blackout_end
from .catchup import catch_up_of, missed_firings
from .condition import ConditionReport, condition
from .cooldown import cooldown_shortfall
from .retry import num_retries, retry_base_delay, retry_state
from .runstate import RunPhase, RunState
from .schedule import Adjustment, StartTimes, start_times
from .times import fmt_duration, fmt_instant, measured_run_time, to_utc
from .validate import PERIODIC_WINDOW, run_time_basis

#: characters of an error's line shown by ``lines()``
ERROR_SHOWN = 200

#: what people read for can_start_by (stored as ``next_run``) and
#: should_start_by (stored as ``deadline``), on every face
EARLIEST_START = "Earliest start"
LATEST_START = "Latest start"


@dataclass(frozen=True)
class RetryOutlook:
    """What the retry policy does next. ``state``: ``none`` (no failure
    pending), ``retrying`` (retry ``retry`` awaited, from ``next_attempt``),
    ``exhausted`` (the retries of this cycle are used up: back to the normal
    schedule), ``no_retries`` (the type has none), ``gave_up`` (disabled
    after failures), ``over`` (cancelled or completed)."""

    state: str
    retries: int
    retries_left: int
    retry: int | None
    next_attempt: datetime | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "retries": self.retries,
            "retries_left": self.retries_left,
            "retry": self.retry,
            "next_attempt": self.next_attempt.isoformat() if self.next_attempt else None,
            "detail": self.detail,
        }


def _after_a_failure(task: Task, task_type: TaskType) -> str:
    budget = num_retries(task_type)
    if budget:
        first = fmt_duration(retry_base_delay(task_type, 1))
        retries = plural(budget, "retry", "retries")
        return f"up to {retries} after a failure, the first {first} after it"
    if task.schedule_kind is ScheduleKind.ONESHOT:
        return f"no retries (task type {task_type.type!r}): a failure disables it"
    return (
        f"no retries (task type {task_type.type!r}): after a failure it waits for its "
        "next regular run"
    )


def retry_outlook(task: Task, task_type: TaskType, times: StartTimes) -> RetryOutlook:
    """What the retry policy (:mod:`.retry`) does next with ``task``."""
    budget = num_retries(task_type)
    failures = task.failure_count
    state = retry_state(task, task_type)
    oneshot = task.schedule_kind is ScheduleKind.ONESHOT
    can = times.can_start_by

    def outlook(name: str, detail: str, at: datetime | None = None) -> RetryOutlook:
        return RetryOutlook(name, budget, state.retries_left, state.retry, at, detail)

    if task.status in (TaskStatus.CANCELLED, TaskStatus.COMPLETED):
        return outlook("over", f"nothing to retry: the task is {task.status}")
    failed = plural(failures, "consecutive failure")
    if task.status is TaskStatus.DISABLED and failures > 0:
        why = (
            f"its {plural(budget, 'retry', 'retries')} used up"
            if oneshot and failures > budget
            else "a permanent failure, or disabled by hand while failing"
        )
        return outlook(
            "gave_up",
            f"disabled after {failed} ({why}); nothing runs until `task respawn {task.id}`",
        )
    if failures <= 0:
        return outlook("none", f"no failure pending; {_after_a_failure(task, task_type)}")
    if state.retry is not None:
        if state.retries_left:
            then = f"{plural(state.retries_left, 'more retry', 'more retries')} if it fails"
        elif oneshot:
            then = f"if it fails, the task is disabled (after {failures + 1} failures)"
        else:
            then = "if it fails, back to its normal schedule"
        return outlook(
            "retrying",
            f"retry {state.retry} of {budget} after {failed}, from {fmt_instant(can)}; {then}",
            can,
        )
    if budget == 0:
        return outlook(
            "no_retries",
            f"no retries (task type {task_type.type!r} has num_retries 0): after {failed} "
            f"it waits for its next regular run, from {fmt_instant(can)}",
            can,
        )
    if oneshot:  # a one-shot left waiting with its retries used up (edited by hand)
        return outlook(
            "exhausted", f"retries used up after {failed}: the next failure disables it", can
        )
    return outlook(
        "exhausted",
        f"the {plural(budget, 'retry', 'retries')} of this cycle were used up ({failed}); "
        f"back to the normal schedule, next run from {fmt_instant(can)}; a new failure "
        f"starts a new cycle of {plural(budget, 'retry', 'retries')}",
        can,
    )


@dataclass(frozen=True)
class CooldownNote:
    """A periodic task's cooldown: its value, whether it is the default one
    (it follows the run time) or a client's (it stays), and the warning of
    :func:`.cooldown.cooldown_shortfall` when it makes every run late."""

    cooldown: timedelta | None
    is_default: bool
    detail: str
    warning: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.cooldown.total_seconds() if self.cooldown is not None else None,
            "is_default": self.is_default,
            "detail": self.detail,
            "warning": self.warning or None,
        }


def cooldown_note(task: Task) -> CooldownNote | None:
    """What :class:`CooldownNote` says of ``task`` (``None``: not periodic)."""
    if task.schedule_kind is not ScheduleKind.PERIODIC:
        return None
    cooldown = task.cooldown
    if cooldown is None:
        detail = "none: a run may start again as soon as the last one ended"
    elif task.cooldown_is_default:
        basis = run_time_basis(task.expected_duration, task.average_good_duration)
        runs = f"twice the run time ({fmt_duration(basis)})" if basis else "twice the run time"
        detail = (
            f"{fmt_duration(cooldown)}, the default: {round((1 - PERIODIC_WINDOW) * 100)} % "
            f"of the period less {runs}, following the run time at each good run"
        )
    else:
        detail = f"{fmt_duration(cooldown)}, given (it stays as it is)"
    shortfall = cooldown_shortfall(task)
    warning = shortfall.detail() if shortfall is not None else ""
    return CooldownNote(cooldown, task.cooldown_is_default, detail, warning)


@dataclass(frozen=True)
class Explanation:
    """The answer of :func:`explain`; ``to_dict()`` is JSON-ready, ``lines()`` is text."""

    task_id: int | None
    task_type: str
    schedule_kind: str
    status: str
    priority: str
    now: datetime
    can_start_by: datetime
    should_start_by: datetime
    finish_by: datetime | None
    basis: str
    reference_start: datetime | None
    dont_run_on_nodes: tuple[str, ...]
    adjustments: tuple[Adjustment, ...]
    condition: ConditionReport
    ready: bool
    blocked_by: tuple[str, ...]
    retry: RetryOutlook | None = None
    #: the task's latest failed run, when the caller read it
    last_failure: TaskRun | None = None
    #: the catch-up policy in force (``latest`` or ``skip``) and its grace
    catch_up: str = str(CatchUp.LATEST)
    catch_up_grace: str = ""
    #: what the catch-up policy did or is about to do ("" when nothing)
    catch_up_note: str = ""
    #: the state of the task's latest run, when the caller read it
    run: RunState | None = None
    #: periodic: its cooldown, whether it is the default one, and why it
    #: makes every run late when it does (:mod:`.cooldown`)
    cooldown: CooldownNote | None = None
    #: why a ready task of long runs may wait for a worker slot ("" when
    #: its runs are not long runs)
    long_run: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "task_type": self.task_type,
            "schedule_kind": self.schedule_kind,
            "status": self.status,
            "priority": self.priority,
            "now": self.now.isoformat(),
            "can_start_by": self.can_start_by.isoformat(),
            "should_start_by": self.should_start_by.isoformat(),
            "finish_by": self.finish_by.isoformat() if self.finish_by else None,
            "basis": self.basis,
            "reference_start": self.reference_start.isoformat() if self.reference_start else None,
            "dont_run_on_nodes": list(self.dont_run_on_nodes),
            "adjustments": [a.to_dict() for a in self.adjustments],
            "condition": self.condition.to_dict(),
            "ready": self.ready,
            "blocked_by": list(self.blocked_by),
            "retry": self.retry.to_dict() if self.retry else None,
            "last_failure": _failure_json(self.last_failure),
            "catch_up": self.catch_up,
            "catch_up_grace": self.catch_up_grace,
            "catch_up_note": self.catch_up_note,
            "run": self.run.to_dict() if self.run is not None else None,
            "cooldown": self.cooldown.to_dict() if self.cooldown is not None else None,
            "long_run": self.long_run or None,
        }

    def lines(self) -> list[str]:
        """A human rendering, one fact per line."""

        def when(instant: datetime) -> str:
            delta = instant - self.now
            if delta.total_seconds() > 0:
                relative = f"in {fmt_duration(delta)}"
            elif delta.total_seconds() < 0:
                relative = f"{fmt_duration(-delta)} ago"
            else:
                relative = "now"
            return f"{fmt_instant(instant)} ({relative})"

        name = f"Task {self.task_id}" if self.task_id is not None else "Task"
        out = [
            f"{name} ({self.task_type}, {self.schedule_kind}, priority {self.priority}): "
            f"status {self.status}",
            f"Condition: {self.condition.level} ({self.condition.reason}) - "
            f"{self.condition.detail}",
        ]
        failure = self.last_failure
        if failure is not None:
            ended = failure.ended or failure.started or failure.scheduled
            out.append(
                f"Last failure: {run_name(failure.id, failure.backend_id)}, {failure.status}, "
                f"ended {when(ended)}: {headline(failure.error, ERROR_SHOWN) or 'no error text'}"
            )
        if self.run is not None:
            out.append(f"Latest run: {self.named(self.run.detail)}")
        if self.retry is not None:
            out.append(f"Retries: {self.retry.detail}")
        out += [
            f"{EARLIEST_START}:  {when(self.can_start_by)}",
            f"{LATEST_START}:    {when(self.should_start_by)}",
        ]
        if self.finish_by is not None:
            out.append(f"Must finish by:  {when(self.finish_by)}")
        out.append(f"Based on: {self.basis}")
        if self.reference_start is not None:
            out.append(f"Reference start: {fmt_instant(self.reference_start)}")
        if self.catch_up == CatchUp.SKIP:
            out.append(f"Catch-up: skip missed firings later than {self.catch_up_grace}")
        else:
            out.append("Catch-up: latest (missed firings run once, late)")
        if self.catch_up_note:
            out.append(f"  {self.catch_up_note}")
        if self.cooldown is not None:
            out.append(f"Cooldown: {self.cooldown.detail}")
            if self.cooldown.warning:
                out.append(f"  Warning: {self.cooldown.warning}")
        if self.long_run:
            out.append(f"Long run: {self.long_run}")
        if self.dont_run_on_nodes:
            out.append(f"Never runs on nodes: {', '.join(self.dont_run_on_nodes)}")
        if self.adjustments:
            out.append("Moved by:")
            out.extend(
                f"  - {a.kind}: {fmt_instant(a.moved_from)} -> {fmt_instant(a.moved_to)}: "
                f"{a.detail}"
                for a in self.adjustments
            )
        if self.ready:
            out.append(
                "Ready: it may run now; the runner takes ready tasks by priority, then by "
                "latest start (the soonest first), as queue capacity allows."
            )
        else:
            out.append("Not running now because:")
            out.extend(f"  - {self.named(reason)}" for reason in self.blocked_by)
        return out

    def named(self, text: str) -> str:
        """``text`` (the latest run's state in words, which names the run
        by its number) with the run's Celery id beside its number."""
        run = self.run.run if self.run is not None else None
        if run is None or run.id is None:
            return text
        number = f"run {run.id}"
        if text == number or text.startswith(f"{number} "):
            return run_name(run.id, run.backend_id) + text[len(number) :]
        return text

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _failure_json(run: TaskRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "run_id": run.id,
        "backend_id": run.backend_id,
        "status": str(run.status),
        "scheduled": run.scheduled.isoformat(),
        "ended": run.ended.isoformat() if run.ended else None,
        "error": run.error,
    }


#: the phases of the latest run that keep the task from being dispatched
_BLOCKING = (
    RunPhase.QUEUED,
    RunPhase.UNKNOWN,
    RunPhase.RUNNING,
    RunPhase.END_NOT_APPLIED,
    RunPhase.NO_RUN,
)


def _blockers(
    task: Task, now: datetime, can_start_by: datetime, run: RunState | None = None
) -> list[str]:
    blocked: list[str] = []
    if task.status is TaskStatus.CANCELLED:
        blocked.append("it was cancelled")
    elif task.status is TaskStatus.COMPLETED:
        blocked.append("it has completed (one-shot)")
    elif task.status is TaskStatus.DISABLED:
        blocked.append("it is disabled (`task respawn` schedules it again)")
    if run is not None:  # the run row says where it is
        if run.phase in _BLOCKING:
            blocked.append(run.detail)
    elif task.owner_started_at is not None:
        where = f" on {task.owner_node}" if task.owner_node else ""
        blocked.append(f"it is already running{where} since {fmt_instant(task.owner_started_at)}")
    elif task.status is TaskStatus.SCHEDULED:
        blocked.append(
            "a run has been dispatched and has not ended (`task runs` shows whether it started)"
        )
    # a scheduled task's run was dispatched: it is not waiting for its start
    if can_start_by > now and task.status is not TaskStatus.SCHEDULED:
        blocked.append(
            f"it may not start before {fmt_instant(can_start_by)} "
            f"(in {fmt_duration(can_start_by - now)})"
        )
    window = blackout_at(task, now)
    if window is not None:
        blocked.append(f"now is inside its blackout window {window} ({task.tz})")
    return blocked


def _catch_up_note(task: Task, task_type: TaskType, now: datetime, can: datetime | None) -> str:
    """The skip a runner pass would make now, else the last one, if it still
    decides the task's times."""
    missed = missed_firings(task, task_type, now)
    if missed is not None:
        return f"The next runner pass records this and does not run it: {missed.reason}."
    resumed = task.skipped_until
    if (
        resumed is not None
        and can is not None
        and to_utc(resumed) >= can
        and task.status is TaskStatus.WAITING
    ):
        return (
            f"Missed firings were skipped, being later than the grace; it waits for the "
            f"firing at {fmt_instant(resumed)} (the skipped run says which: `task runs`)."
        )
    return ""


def explain(
    task: Task,
    task_type: TaskType,
    now: datetime,
    *,
    last_failure: TaskRun | None = None,
    run: RunState | None = None,
) -> Explanation:
    """Everything that decides when ``task`` runs, at ``now``; with
    ``last_failure`` (its latest failed run, read by the caller), what it
    said; with ``run`` (:func:`~.runstate.run_state` of its latest run),
    which state that run is in: queued, running (by which worker, since
    when), or ended without its end reaching the task."""
    now = to_utc(now)
    times = start_times(task, task_type, now)
    report = condition(task, task_type, now, times=times)
    # the runner claims a waiting task by its stored next run (a respawn or
    # a "run now" moved it): readiness is read where the runner reads it
    ready_at = times.can_start_by
    if task.status is TaskStatus.WAITING:  # and out of its blackout windows, as a claim
        ready_at = blackout_end(task, to_utc(task.next_run))
    blocked = _blockers(task, now, ready_at, run)
    basis = times.basis
    if ready_at != times.can_start_by:
        basis += (
            f"; its stored earliest start, {fmt_instant(ready_at)}, is what the runner reads (set "
            f"by a respawn, a run now or an edit), not the computed "
            f"{fmt_instant(times.can_start_by)}"
        )
    if task_type.paused_at is not None and task.status is TaskStatus.WAITING:
        blocked.append(
            f"its type is paused since {fmt_instant(task_type.paused_at)} "
            f"(`task-type resume {task_type.type}` dispatches it again)"
        )
    policy, grace = catch_up_of(task, task_type)
    return Explanation(
        catch_up=str(policy),
        catch_up_grace=fmt_duration(grace),
        catch_up_note=_catch_up_note(task, task_type, now, times.normal_can_start_by),
        task_id=task.id,
        task_type=task.type,
        schedule_kind=str(task.schedule_kind),
        status=str(task.status),
        priority=str(task.priority),
        now=now,
        can_start_by=ready_at,
        should_start_by=times.should_start_by,
        finish_by=times.finish_by,
        basis=basis,
        reference_start=times.reference_start,
        dont_run_on_nodes=task.dont_run_on_nodes,
        adjustments=times.adjustments,
        condition=report,
        ready=not blocked,
        blocked_by=tuple(blocked),
        retry=retry_outlook(task, task_type, times),
        last_failure=last_failure,
        run=run,
        cooldown=cooldown_note(task),
        long_run=long_run_note(task, task_type),
    )


def long_run_note(task: Task, task_type: TaskType | None = None) -> str:
    """Why ``task`` may wait for a worker slot once ready, when its runs may
    be long runs (:data:`~..enums.LONG_RUN_FLOOR` or more, read as the
    runner's claim reads them: its average good run, else its
    ``expected_duration``, else its ``max_expected_duration`` or its type's;
    or a last run that failed after that long); "" otherwise. Whether they
    are depends each pass on the deadlines of the shorter tasks waiting on
    its queue (:mod:`~..dispatch.reserve`)."""
    failed = _failed_long(task)
    known = measured_run_time(task)
    if known is None:
        said = task.max_expected_duration
        if said is None and task_type is not None:
            said = task_type.max_expected_duration
        known = (said, "expected at most") if said is not None else None
    if failed is not None:
        why = f"its last run failed after {fmt_duration(failed)}"
    elif known is not None and known[0] >= LONG_RUN_FLOOR:
        expected, how = known
        source = "on average" if how == "measured" else how
        why = f"its runs take {fmt_duration(expected)} ({source})"
    else:
        return ""
    return (
        f"{why}: while shorter tasks wait on its queue, a runner that hears its workers keeps "
        f"{round(RESERVED_SHARE * 100)} % of their slots (at least one) from runs that would "
        f"hold a slot past the earliest deadline of those tasks "
        f"({fmt_duration(LONG_RUN_FLOOR)} at least), so once ready it may wait for a slot"
    )


def _failed_long(task: Task) -> timedelta | None:
    """How long the task's last run lasted, when it failed after
    :data:`~..enums.LONG_RUN_FLOOR` or more (a timeout, say)."""
    if task.failure_count == 0 or task.last_start_at is None or task.last_end_at is None:
        return None
    lasted = to_utc(task.last_end_at) - to_utc(task.last_start_at)
    return lasted if lasted >= LONG_RUN_FLOOR else None
