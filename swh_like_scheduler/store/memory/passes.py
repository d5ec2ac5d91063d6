"""What a runner pass and the monitor's load duty ask besides claims, in
memory: the long runs and the slack a kept slot helps (:mod:`..sql_long`),
missed firings skipped (:mod:`..sql_catchup`), the room a pass had and the
classes it left behind (:mod:`..sql_monitor`), each type's load
(:mod:`..sql_load`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from ...domain.enums import LONG_RUN, LONG_RUN_FLOOR, check_aware
from ...domain.exceptions import InvalidInput
from ...domain.model import (
    PRIORITY_ORDER,
    CatchUp,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskType,
    TypeLoad,
    run_backend_id,
)
from ...domain.records import Skip
from ...policy.catchup import after_skip, missed_firings
from ..sql_catchup import skipped_entry
from ..sql_load import check_load_settings, demand_of
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
        indexes = state.indexes
        with state.lock:
            kind = state.types.get(task_type)
            in_flight, short_in_flight = 0, False
            for task_id in indexes.scheduled.get(task_type, ()):
                if is_long(state.tasks[task_id], kind, long_run):
                    in_flight += 1
                else:
                    short_in_flight = True
            soon = now + within
            short_due = any(
                not is_long(task, kind, long_run)
                for priority in PRIORITY_ORDER
                for task in state.waiting(indexes.ready(task_type, priority, soon))
            )
        return LongRuns(in_flight=in_flight, short_due=short_due, short_in_flight=short_in_flight)

    def short_slack(
        self, task_type: str, *, now: datetime, floor: timedelta = LONG_RUN_FLOOR
    ) -> timedelta | None:
        check_aware("now", now)
        if floor < timedelta(0):
            raise InvalidInput("floor", f"{floor} is negative")
        state = self._state
        found: list[timedelta] = []
        with state.lock:
            kind = state.types.get(task_type)
            for priority in PRIORITY_ORDER:  # per class, its earliest deadline helped
                for task in state.waiting(state.indexes.by_deadline(task_type, priority)):
                    slack = task.deadline - now
                    expected = expected_run(task, kind)
                    if expected is None or expected < max(slack, floor):
                        found.append(slack)
                        break
        # (to the millisecond, as the SQL store gives it)
        return timedelta(seconds=round(min(found).total_seconds(), 3)) if found else None

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
            indexes = state.indexes
            own = (state.tasks[i] for i in indexes.own_catch_up.get(task_type, ()))
            found = [t for t in own if t.next_run <= now]
            if kind.catch_up is CatchUp.SKIP:
                cutoff = now - kind.catch_up_grace
                found.extend(
                    task
                    for priority in PRIORITY_ORDER
                    for task in state.waiting(indexes.ready(task_type, priority, cutoff))
                    if _late(task, cutoff)
                )
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
        details = skipped_entry(missed, now)
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
                    for t in state.waiting(state.indexes.ready(task_type, priority, at))
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
        check_load_settings(now, window, slack)
        state = self._state
        indexes = state.indexes
        loads: dict[str, TypeLoad] = {}
        with self._write("measure task type loads"):
            for name in sorted(state.types):
                loads[name] = TypeLoad(
                    demand=self._demand(name),
                    delivered=self._delivered(name, now, window),
                    backlog=indexes.backlog(name, now - slack),
                    measured_at=now,
                )
            for name, load in loads.items():
                measured = replace(
                    state.types[name],
                    load_demand=load.demand,
                    load_delivered=load.delivered,
                    load_backlog=load.backlog,
                    load_measured_at=now,
                )
                state.put_type(measured)
        return loads

    def _demand(self, name: str) -> float:
        """A type's demand over its live adaptive tasks (:mod:`..sql_load`;
        the shares summed correctly rounded, as a simulation's SQL store does)."""
        shares = self._state.indexes.shares.get(name, {})
        known = [share for share in shares.values() if share is not None]
        return demand_of(len(shares), len(known), math.fsum(known))

    def _delivered(self, name: str, now: datetime, window: timedelta) -> float:
        """The share of ``window`` a type's adaptive tasks' runs took."""
        state = self._state
        indexes = state.indexes
        since = now - window
        busy = 0.0
        going = (state.runs[i] for i in indexes.started.get(name, ()))
        ended = (state.runs[i] for i in indexes.ended_between(name, since, now))
        for run in itertools.chain(going, ended):
            started = run.started
            task = state.tasks.get(run.task_id)
            if started is None or started >= now or task is None:
                continue
            if task.schedule_kind is ScheduleKind.ADAPTIVE:
                busy += ((run.ended or now) - max(started, since)).total_seconds()
        return max(0.0, busy) / window.total_seconds()


def _late(task: Task, cutoff: datetime) -> bool:
    """Whether a task that follows its type's catch-up policy ``skip`` may
    have missed its firing (a superset: the policy decides;
    :func:`..sql_catchup._candidates`): due before ``cutoff`` (now less the
    grace), and for all but cron its deadline too."""
    if task.catch_up is not None or task.catch_up_grace is not None:
        return False  # its own setting: found apart
    return task.next_run < cutoff and (
        task.schedule_kind is ScheduleKind.CRON or task.deadline < cutoff
    )
