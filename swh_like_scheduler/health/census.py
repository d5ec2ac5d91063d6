"""The census: every watched task's condition kept in the store's ledger,
and the counts stored with their instant.

A task's level is a function of its row, its type's settings and the
clock (:func:`~swh_like_scheduler.policy.condition`); it changes with the
clock alone only at the instants :func:`~swh_like_scheduler.policy.level_holds_until`
gives. So a refresh assesses, with the policy, only the tasks whose row or
type changed since their last assessment, or whose level may have moved
with the clock; the store finds them with two scans of its own
(:meth:`~swh_like_scheduler.store.interface.CensusStore.conditions_to_assess`)
and counts the ledger with a ``GROUP BY``. Every API replica then reads the
stored census; none reads every task.

:func:`refresh` is one step: the monitor runs it at each pass, an API with
no monitor behind it runs it in the background, and a lock in the store
lets one process at a time do it. A step stops after ``budget`` seconds
of assessing (the first build of a large ledger spans several steps) and
stores a census only once every task found was assessed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .. import policy
from ..domain.model import Task, TaskStatus, TaskType
from ..store import SchedulerStore
from ..store.values import CensusRecord, ConditionRow
from .conditions import problem_text

logger = logging.getLogger(__name__)

#: the store lock one refreshing process holds
CENSUS_LOCK = "census"
#: tasks read and assessed per batch
BATCH = 1000
#: task ids asked of the store per scan (each scan stops there)
SCAN = 10_000
#: how long the stored history goes back
KEEP = timedelta(hours=6)
#: how far before the last census the changes are read again (commits
#: that landed late, clocks of other hosts a little behind)
OVERLAP = timedelta(minutes=2)
#: task ids the rolling sweep compares per step
SWEEP = 50_000
#: the tasks no longer watched (finished, cancelled) are counted at one
#: census in this many
UNWATCHED_EVERY = 10
#: the statuses whose tasks have a condition (the others are OK by definition)
WATCHED = (TaskStatus.WAITING, TaskStatus.SCHEDULED, TaskStatus.DISABLED)


def type_version(task_type: TaskType) -> str:
    """A fingerprint of the settings of ``task_type`` a condition reads
    (everything but the load the monitor measures, which only the interval
    rule reads): a task assessed with another is assessed again."""
    fields = {
        name: value
        for name, value in dataclasses.asdict(task_type).items()
        if not name.startswith("load_")
    }
    text = json.dumps(fields, default=str, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ledger_row(task: Task, task_type: TaskType, version: str, now: datetime) -> ConditionRow:
    """``task``'s condition at ``now`` as the ledger keeps it."""
    times = None
    if task.status in (TaskStatus.WAITING, TaskStatus.SCHEDULED):
        times = policy.start_times(task, task_type, now)
    report = policy.condition(task, task_type, now, times=times)
    holds = policy.level_holds_until(task, task_type, now, times=times)
    level = report.level.value
    return ConditionRow(
        task_id=task.id or 0,
        type=task.type,
        level=level,
        reason=report.reason.value,
        finish_by=None if times is None else times.finish_by,
        holds_until=holds,
        kind=str(task.schedule_kind),
        priority=str(task.priority),
        text="" if level == "OK" else problem_text(task),
        seen_updated_at=task.updated_at or now,
        seen_started_at=task.owner_started_at,
        seen_status=task.status.value,
        type_seen=version,
    )


@dataclass(frozen=True)
class Refresh:
    """What one :func:`refresh` step did."""

    #: tasks assessed, and ledger rows dropped (tasks no longer watched)
    assessed: int = 0
    dropped: int = 0
    #: the census it stored (``None``: the step ran out of budget, or had
    #: nothing to do: ``skipped`` says why)
    census: CensusRecord | None = None
    skipped: str | None = None
    took: float = 0.0


def refresh(
    store: SchedulerStore,
    now: datetime,
    *,
    holder: str,
    fresh_for: timedelta = timedelta(0),
    budget: float = 5.0,
    keep: timedelta = KEEP,
    batch: int = BATCH,
    monotonic: Callable[[], float] = time.monotonic,
) -> Refresh:
    """One census step at ``now`` (see the module doc), unless the latest
    stored census is younger than ``fresh_for`` or another process holds
    the census lock. Tasks are read and assessed ``batch`` at a time."""
    latest = store.latest_census()
    if latest is not None and timedelta(0) <= now - latest.at < fresh_for:
        return Refresh(skipped="fresh")
    ttl = timedelta(seconds=budget + 60)
    lock = store.acquire_lock(CENSUS_LOCK, holder=holder, ttl=ttl)
    if not lock.held:
        return Refresh(skipped=f"another process ({lock.holder}) is counting")
    started = monotonic()
    try:
        return _refresh(
            store, now, keep=keep, budget=budget, batch=batch, started=started, clock=monotonic
        )
    finally:
        store.release_lock(CENSUS_LOCK, holder=holder)


def _refresh(
    store: SchedulerStore,
    now: datetime,
    *,
    keep: timedelta,
    budget: float,
    batch: int,
    started: float,
    clock: Callable[[], float],
) -> Refresh:
    types = {t.type: t for t in store.get_task_types()}
    versions = {name: type_version(t) for name, t in types.items()}
    latest = store.latest_census()
    since, retyped = None, list(versions)
    if latest is not None and latest.at <= now:
        # what changed since the last census (a clock moved back: everything)
        since = latest.at - OVERLAP
        retyped = [name for name, v in versions.items() if latest.versions.get(name) != v]
    done = Refresh()

    def assess(ids: list[int]) -> bool:
        """Assess ``ids`` a batch at a time; False once the budget is spent."""
        nonlocal done
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            found = store.get_tasks(chunk)
            rows = [
                ledger_row(task, types[task.type], versions[task.type], now)
                for task in found
                if task.status in WATCHED and task.type in types
            ]
            store.put_conditions(rows, now=now)
            gone = sorted(set(chunk) - {row.task_id for row in rows})
            dropped = store.drop_conditions(gone)
            done = Refresh(done.assessed + len(rows), done.dropped + dropped)
            if clock() - started > budget:
                return False
        return True

    # tasks newer than any in the ledger, in id order: a first build goes
    # on where the last step stopped
    after = store.condition_frontier()
    while ids := store.conditions_to_assess(now, versions, limit=SCAN, after_id=after):
        if not assess(ids):
            return _partial(done, clock() - started)
        after = ids[-1]
        if len(ids) < SCAN:
            break
    # every other change: rows that differ from their task or type, levels
    # the clock may have moved, tasks that lost their row
    while True:
        ids = store.conditions_to_assess(now, versions, limit=SCAN, since=since, retyped=retyped)
        if not assess(ids):
            return _partial(done, clock() - started)
        if len(ids) < SCAN:
            break
    # and a slice of the rolling sweep, for what no index shows
    sweep_after = 0 if latest is None else latest.sweep_after
    if assess(store.sweep_conditions(versions, after_id=sweep_after, span=SWEEP)):
        sweep_after = sweep_after + SWEEP if sweep_after + SWEEP < after else 0
    # finished and cancelled tasks only pile up: counted at every tenth census
    again = latest is None or latest.id % UNWATCHED_EVERY == UNWATCHED_EVERY - 1
    conditions, tasks = store.count_conditions(unwatched=again)
    if not again and latest is not None:
        tasks.update({k: n for k, n in latest.tasks.items() if k[1] not in WATCHED})
    took = clock() - started
    record = store.save_census(
        at=now,
        conditions=conditions,
        tasks=tasks,
        assessed=done.assessed,
        took=took,
        keep=keep,
        versions=versions,
        sweep_after=sweep_after,
    )
    logger.debug("census at %s: %d assessed in %.2f s", now.isoformat(), done.assessed, took)
    return Refresh(done.assessed, done.dropped, census=record, took=took)


def _partial(done: Refresh, took: float) -> Refresh:
    logger.info("census: %d task(s) assessed, more at the next step", done.assessed)
    return Refresh(done.assessed, done.dropped, skipped="budget", took=took)
