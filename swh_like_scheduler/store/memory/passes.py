"""What a runner pass and the monitor's load duty ask besides claims, in
memory: the long runs and the slack a kept slot helps (:mod:`..sql_long`),
missed firings skipped (:mod:`..sql_catchup`), the room a pass had and the
classes it left behind (:mod:`..sql_monitor`), each type's load
(:mod:`..sql_load`)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ...domain.enums import LONG_RUN, LONG_RUN_FLOOR, check_aware
from ...domain.exceptions import InvalidInput
from ...domain.model import (
    PRIORITY_ORDER,
    CatchUp,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
    TypeLoad,
    run_backend_id,
)
from ...domain.records import SKIPPED, Skip
from ...policy.catchup import after_skip, missed_firings
from ..sql_load import demand_of
from ..values import LongRuns
from .claims import expected_run, is_long, runnable_on
from .runs import RunMethods


class PassMethods(RunMethods):
    """Long runs, slack, skipped firings, room and loads."""

    def long_runs(
        self,
        task_type: str,
        *,
        now: datetime,
        within: timedelta,
        long_run: timedelta = LONG_RUN,
    ) -> LongRuns:
        check_aware("now", now)
        if within < timedelta(0):
            raise InvalidInput("within", f"{within} is negative")
        if long_run <= timedelta(0):
            raise InvalidInput("long_run", f"{long_run} is not positive")
        state = self._state
        with state.lock:
            kind = state.types.get(task_type)
            in_flight, short_in_flight = 0, False
            for task in state.scheduled_of(task_type):
                if is_long(task, kind, long_run):
                    in_flight += 1
                else:
                    short_in_flight = True
            soon = now + within
            short_due = any(
                not is_long(task, kind, long_run)
                for priority in PRIORITY_ORDER
                for task in state.index(task_type, priority).ready(state.tasks, soon)
            )
        return LongRuns(in_flight=in_flight, short_due=short_due, short_in_flight=short_in_flight)

    def short_slack(
        self, task_type: str, *, now: datetime, floor: timedelta = LONG_RUN_FLOOR
    ) -> timedelta | None:
        check_aware("now", now)
        if floor < timedelta(0):
            raise InvalidInput("floor", f"{floor} is negative")
        state = self._state
        with state.lock, closing(state.by_deadline(task_type)) as walk:
            kind = state.types.get(task_type)
            for task in walk:
                slack = task.deadline - now
                expected = expected_run(task, kind)
                if expected is None or expected < max(slack, floor):
                    # (to the millisecond, as the SQL store gives it)
                    return timedelta(seconds=round(slack.total_seconds(), 3))
        return None

    # -- catch-up -------------------------------------------------------------

    def skip_missed_firings(
        self, task_type: str, *, now: datetime, limit: int = 1000
    ) -> list[Skip]:
        state = self._state
        skips: list[Skip] = []
        with self._write("skip missed firings"):
            kind = state.types.get(task_type)
            if kind is None or kind.paused_at is not None:
                return []
            found = [
                task
                for priority in PRIORITY_ORDER
                for task in state.index(task_type, priority).ready(state.tasks, now)
                if _candidate(task, kind, now)
            ]
            found.sort(key=lambda t: (t.next_run, t.id or 0))
            for task in found[:limit]:
                skip = self._skip(task, kind, now)
                if skip is not None:
                    skips.append(skip)
        return skips

    def _skip(self, task: Task, kind: TaskType, now: datetime) -> Skip | None:
        missed = missed_firings(task, kind, now)
        if missed is None or task.id is None:
            return None
        after = after_skip(task, kind, missed, now).updated(updated_at=now)
        details: dict[str, Any] = {
            "event": SKIPPED,
            "at": now.isoformat(),
            "first": missed.first.isoformat(),
            "count": missed.count,
            "grace_seconds": missed.grace / timedelta(seconds=1),
        }
        if missed.more:
            details["more"] = True
        if missed.resume_at is not None:
            details["resume_at"] = missed.resume_at.isoformat()
        backend_id = run_backend_id(task.id, task.next_run, self._run_namespace())
        run = self._new_run(task.id, backend_id, task.next_run, now, None)
        run = replace(
            run, ended=now, status=RunStatus.SKIPPED, error=missed.reason, history=(details,)
        )
        self._state.put_run(run)
        self._state.put_task(after)
        return Skip(
            task=after,
            run=run,
            first=missed.first,
            count=missed.count,
            more=missed.more,
            resume_at=missed.resume_at,
        )

    # -- room -----------------------------------------------------------------

    def ready_left_behind(
        self,
        task_type: str,
        *,
        at: datetime,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
    ) -> list[Priority]:
        check_aware("at", at)
        wanted = set(priorities or PRIORITY_ORDER)
        state = self._state
        with state.lock:
            return [
                priority
                for priority in PRIORITY_ORDER
                if priority in wanted
                and any(
                    t.updated_at is not None and t.updated_at <= at and runnable_on(t, nodes)
                    for t in state.index(task_type, priority).ready(state.tasks, at)
                )
            ]

    def record_room(
        self, task_type: str, *, at: datetime, priorities: Sequence[Priority] | None = None
    ) -> None:
        check_aware("at", at)
        state = self._state
        with self._write("record dispatch room"):
            kind = state.types.get(task_type)
            if kind is not None and kind.paused_at is not None:
                return  # a pass claimed nothing because of the pause: no room
            for priority in priorities or PRIORITY_ORDER:
                state.put(state.room, (task_type, Priority(priority)), at)

    # -- loads ----------------------------------------------------------------

    def measure_type_loads(
        self, *, now: datetime, window: timedelta, slack: timedelta
    ) -> dict[str, TypeLoad]:
        if now.tzinfo is None or now.utcoffset() is None:
            raise InvalidInput("now", f"{now.isoformat()} has no time zone")
        if window <= timedelta(0):
            raise InvalidInput("load_window", f"{window} must be longer than zero")
        if slack < timedelta(0):
            raise InvalidInput("load_slack", f"{slack} is negative")
        state = self._state
        with self._write("measure task type loads"):
            demand = self._demand()
            delivered = self._delivered(now, window)
            backlog = self._backlog(now - slack)
            loads = {
                name: TypeLoad(
                    demand=demand.get(name, 0.0),
                    delivered=delivered.get(name, 0.0),
                    backlog=backlog.get(name, 0),
                    measured_at=now,
                )
                for name in sorted(state.types)
            }
            for name, load in loads.items():
                measured = replace(
                    state.types[name],
                    load_demand=load.demand,
                    load_delivered=load.delivered,
                    load_backlog=load.backlog,
                    load_measured_at=now,
                )
                state.put(state.types, name, measured)
        return loads

    def _demand(self) -> dict[str, float]:
        """``{type: demand}`` over its live adaptive tasks (:mod:`..sql_load`)."""
        counts: dict[str, list[Any]] = {}
        types = self._state.types
        for task in self._state.tasks.values():
            if task.schedule_kind is not ScheduleKind.ADAPTIVE or task.status not in _LIVE:
                continue
            entry = counts.setdefault(task.type, [0, []])
            entry[0] += 1
            share = demand_share(task, types.get(task.type))
            if share is not None:
                entry[1].append(share)
        return {
            name: demand_of(count, len(shares), sum(shares))
            for name, (count, shares) in counts.items()
        }

    def _delivered(self, now: datetime, window: timedelta) -> dict[str, float]:
        """Per type, the share of ``window`` its adaptive tasks' runs took."""
        since = now - window
        busy: dict[str, float] = {}
        tasks = self._state.tasks
        for run in self._state.runs.values():
            if run.started is None or run.started >= now:
                continue
            ended = run.ended
            if ended is None:
                if run.status is not RunStatus.STARTED:
                    continue
                ended = now
            elif not since < ended <= now:
                continue
            task = tasks.get(run.task_id)
            if task is None or task.schedule_kind is not ScheduleKind.ADAPTIVE:
                continue
            seconds = (ended - max(run.started, since)).total_seconds()
            busy[task.type] = busy.get(task.type, 0.0) + seconds
        length = window.total_seconds()
        return {name: max(0.0, total) / length for name, total in busy.items()}

    def _backlog(self, before: datetime) -> dict[str, int]:
        """Per type, its adaptive tasks waiting with a ``next_run`` before ``before``."""
        backlog: dict[str, int] = {}
        for task in self._state.tasks.values():
            if (
                task.schedule_kind is ScheduleKind.ADAPTIVE
                and task.status is TaskStatus.WAITING
                and task.next_run < before
            ):
                backlog[task.type] = backlog.get(task.type, 0) + 1
        return backlog


_LIVE = (TaskStatus.WAITING, TaskStatus.SCHEDULED)


def demand_share(task: Task, kind: TaskType | None) -> float | None:
    """One task's demand, ``avg / (I + avg)`` (:meth:`..sql_load.LoadMethods._demand_share`)."""
    avg = task.expected_duration or task.average_good_duration
    interval = task.current_interval or (kind.default_interval if kind is not None else None)
    if avg is None or interval is None:
        return None
    total = (interval + avg).total_seconds()
    return avg.total_seconds() / total if total else None


def _candidate(task: Task, kind: TaskType, now: datetime) -> bool:
    """Whether a ready task's firing may be missed at ``now`` (a superset:
    the policy decides; :func:`..sql_catchup._candidates`)."""
    if task.catch_up is not None or task.catch_up_grace is not None:
        return True
    if kind.catch_up is not CatchUp.SKIP:
        return False
    cutoff = now - kind.catch_up_grace
    return task.next_run < cutoff and (
        task.schedule_kind is ScheduleKind.CRON or task.deadline < cutoff
    )
