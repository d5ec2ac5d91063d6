"""Claims in memory: which ready tasks a runner pass takes, in which order
(:meth:`~..role_runs.RunStore.claim_ready_tasks`).

The order keys are those of :func:`..sql_claim.order_keys`, computed in
Python from the same columns (a property test holds the two equal on
random ready tasks); the long-run rule is :mod:`..sql_long`'s.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from ...domain.enums import LONG_RUN
from ...domain.exceptions import Conflict
from ...domain.model import (
    DUE_MARGIN,
    PRIORITY_ORDER,
    Claimed,
    DispatchOrder,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
    run_backend_id,
)
from ...policy import leave_blackouts, window_at
from ..sql_claim import _MODULUS, _MULTIPLIER, _ONE_SHOT_CYCLE, SPARSE_FACTOR, random_salt
from ..sql_runs import dispatch_order
from .base import MemoryBase
from .state import Batch

OrderKey = tuple[Any, Any, int]


def order_key(order: DispatchOrder, now: datetime) -> Callable[[Task], OrderKey]:
    """The sort key of ``order`` at ``now`` (:func:`..sql_claim.order_keys`)."""
    if order is DispatchOrder.FIFO:
        return lambda t: (0, t.next_run, t.id or 0)
    if order is DispatchOrder.RANDOM:
        salt = random_salt(now)

        def mixed(t: Task) -> OrderKey:
            task_id = t.id or 0
            return (((task_id ^ salt) % _MODULUS) * _MULTIPLIER % _MODULUS, t.deadline, task_id)

        return mixed
    if order is DispatchOrder.TRIAGE:
        due_by = now + DUE_MARGIN

        def triage(t: Task) -> OrderKey:
            if t.deadline <= due_by:
                if t.schedule_kind is ScheduleKind.ONESHOT:
                    cycle = _ONE_SHOT_CYCLE
                else:
                    since = t.last_good_end_at or t.created_at or t.deadline
                    cycle = (t.deadline - since).total_seconds()
                return (0, -cycle, t.id or 0)
            return (1, (t.deadline - now).total_seconds(), t.id or 0)

        return triage
    return lambda t: (0, t.deadline, t.id or 0)


def expected_run(task: Task, task_type: TaskType | None) -> timedelta | None:
    """How long a task's run is expected to last (:func:`..sql_long.expected_run`)."""
    for value in (
        task.average_good_duration,
        task.expected_duration,
        task.max_expected_duration,
        task_type.max_expected_duration if task_type is not None else None,
    ):
        if value is not None:
            return value
    return None


def is_long(task: Task, task_type: TaskType | None, long_run: timedelta) -> bool:
    """Whether a task's runs are long runs (:func:`..sql_long.is_long`)."""
    expected = expected_run(task, task_type)
    if expected is not None and expected >= long_run:
        return True
    return (
        task.failure_count > 0
        and task.last_start_at is not None
        and task.last_end_at is not None
        and (task.last_end_at - task.last_start_at) >= long_run
    )


def runnable_on(task: Task, nodes: Sequence[str] | None) -> bool:
    """Whether a task may go to one of ``nodes`` (:func:`..sql_claim.runnable_on`)."""
    banned = task.dont_run_on_nodes
    if not banned:
        return True
    return bool(nodes) and any(node not in banned for node in nodes or ())


class ClaimMethods(MemoryBase):
    """Ready tasks, claimed in dispatch order."""

    def claim_ready_tasks(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
        among: Sequence[int] | None = None,
        order: DispatchOrder = DispatchOrder.DEADLINE,
        short_only: bool = False,
        long_run: timedelta = LONG_RUN,
    ) -> list[Claimed]:
        order = dispatch_order(order)
        if limit <= 0 or (among is not None and not among):
            return []
        state = self._state
        with self._write("claim ready tasks"):
            kind = state.types.get(task_type)
            if kind is not None and kind.paused_at is not None:
                return []  # nothing of a paused type is dispatched
            picked = self._ordered(
                task_type, now, limit, priorities, nodes, order, short_only, long_run, among
            )
            if not picked:
                return []
            batch = state.next_id("batch")
            namespace = self._run_namespace()
            claimed: list[Claimed] = []
            for task in picked:
                periods = task.blackout_periods
                if periods and window_at(periods, task.tz, now) is not None:
                    # inside one of its windows: back to wait for its end
                    back = task.updated(
                        next_run=leave_blackouts(periods, task.tz, now), updated_at=now
                    )
                    state.put_task(back)
                    continue
                task_id = task.id or 0
                backend_id = run_backend_id(task_id, task.next_run, namespace)
                state.put_task(task.updated(status=TaskStatus.SCHEDULED, updated_at=now))
                self._new_run(task_id, backend_id, task.next_run, now, batch)
                claimed.append(
                    Claimed(
                        task_id,
                        task.next_run,
                        task.deadline,
                        backend_id,
                        task.arguments,
                        task.dont_run_on_nodes,
                        batch,
                    )
                )
            if claimed:
                state.put(state.batches, batch, Batch(claimed_at=now))
        return claimed

    def _new_run(
        self, task_id: int, backend_id: str, slot: datetime, now: datetime, batch: int | None
    ) -> TaskRun:
        """A ``scheduled`` run of a task for ``slot`` (the database's unique
        backend id and slot per task hold)."""
        state = self._state
        if backend_id in state.backend_ids or (task_id, slot) in state.slots:
            raise Conflict(f"{state.where}: this slot of the task was already dispatched")
        run = TaskRun.stored(
            {
                "task_id": task_id,
                "backend_id": backend_id,
                "slot": slot,
                "scheduled": now,
                "status": RunStatus.SCHEDULED,
                "id": state.next_id("run"),
                "started": None,
                "ended": None,
                "worker": None,
                "error": None,
                "progress": None,
                "result": None,
                "history": (),
                "fence": None,
            }
        )
        state.put_run(run)
        state.put(state.backend_ids, backend_id, run.id)
        state.put(state.slots, (task_id, slot), run.id)
        if batch is not None:
            state.put(state.run_batches, run.id, batch)
        return run

    def ready_task_ids(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
        order: DispatchOrder = DispatchOrder.DEADLINE,
        short_only: bool = False,
        long_run: timedelta = LONG_RUN,
    ) -> list[int]:
        order = dispatch_order(order)
        if limit <= 0:
            return []
        with self._state.lock:
            picked = self._ordered(
                task_type, now, limit, priorities, nodes, order, short_only, long_run, None
            )
        return [t.id or 0 for t in picked]

    def _ordered(
        self,
        task_type: str,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None,
        nodes: Sequence[str] | None,
        order: DispatchOrder,
        short_only: bool,
        long_run: timedelta,
        among: Sequence[int] | None,
    ) -> list[Task]:
        """Up to ``limit`` ready claimable tasks, class by class, in ``order``."""
        state = self._state
        indexes = state.indexes
        wanted = set(priorities) if priorities else set(PRIORITY_ORDER)
        allowed = None if among is None else set(among)
        kind = state.types.get(task_type)

        def claimable(t: Task) -> bool:
            return (
                (allowed is None or t.id in allowed)
                and runnable_on(t, nodes)
                and not (short_only and is_long(t, kind, long_run))
            )

        key = order_key(order, now)
        chosen: list[Task] = []
        for priority in PRIORITY_ORDER:
            room = limit - len(chosen)
            if priority not in wanted or room <= 0:
                continue
            ready = indexes.count_ready(task_type, priority, now)
            if not ready:
                continue
            if order is DispatchOrder.FIFO:  # the index's own order
                found = state.waiting(indexes.ready(task_type, priority, now))
                chosen.extend(islice((t for t in found if claimable(t)), room))
            elif order is DispatchOrder.DEADLINE and ready > room * SPARSE_FACTOR:
                # many ready: walk the deadlines until enough are found
                walk = state.waiting(indexes.by_deadline(task_type, priority))
                chosen.extend(islice((t for t in walk if t.next_run <= now and claimable(t)), room))
            else:
                found = state.waiting(indexes.ready(task_type, priority, now))
                candidates = [t for t in found if claimable(t)]
                chosen.extend(heapq.nsmallest(room, candidates, key=key))
        return chosen
