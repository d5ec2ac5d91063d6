"""Keeping the Redis index in line with the database, which stays the truth.

* :func:`file_tasks`: after a write that changed tasks' schedules (creation,
  an outcome, respawn, disable, cancel, a job replaced), their entries are
  filed again from what the database now holds.
* :func:`repair`: ids the index handed out that the database did not let a
  claim take (the task moved on, or is claimed elsewhere), or whose claim
  went stuck, are filed again from the database.
* :func:`.rebuild.rebuild` (its own module): an empty, emptied
  (``FLUSHALL``, a restart without persistence) or never built index of a
  type is filled from the waiting tasks while the runners claim from the
  database; it is used again only once complete.
* :func:`drift`: how many of a sample of waiting tasks the index files at
  other times, or lacks (repaired on the way).
* :func:`strays`: entries of tasks that are no longer waiting (disabled,
  deleted, or changed behind the index's back), taken out.

A task the index lacks is never lost: a runner whose index claim came short
of its capacity also claims from the database (:mod:`..runner.dispatch`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import redis

from ..domain.model import Task, TaskStatus
from ..store import SchedulerStore, TaskFilter
from .redis_index import IndexUnavailable, RedisIndex, entry

logger = logging.getLogger(__name__)


def file_tasks(index: RedisIndex, tasks: Iterable[Task]) -> int:
    """File ``tasks`` as the database holds them (waiting ones in, others out)."""
    by_type: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_type[task.type].append(task)
    return sum(index.put(name, group) for name, group in by_type.items())


def repair(
    index: RedisIndex,
    store: SchedulerStore,
    task_type: str,
    ids: Sequence[int],
    *,
    parked_at: datetime | None = None,
    park_until: datetime | None = None,
) -> int:
    """File again, from the database, the tasks of these ids (ids of tasks
    gone from the database are taken out). With ``parked_at``, the tasks
    still ready at that instant are left in ``claimed`` (the claim of
    ``ids`` just refused them: see :meth:`.keeper.IndexKeeper.settle`),
    until ``park_until`` if given. Returns how many were filed again."""
    if not ids:
        return 0
    tasks = store.get_tasks(list(ids))
    gone = set(ids) - {t.id for t in tasks}
    if parked_at is not None:
        parked = {t.id for t in tasks if t.status is TaskStatus.WAITING and t.next_run <= parked_at}
        tasks = [t for t in tasks if t.id not in parked]
        if park_until is not None:
            index.park(task_type, [i for i in parked if i is not None], until=park_until)
    index.put(task_type, tasks)
    if gone:
        index.remove(task_type, gone)
    return len(tasks)


@dataclass(frozen=True)
class Drift:
    """What :func:`drift` found in one page of waiting tasks."""

    checked: int
    #: waiting tasks the index did not hold
    missing: int
    #: waiting tasks the index held at another can_start_by or deadline
    wrong: int
    #: the last id checked (the next page starts after it)
    last_id: int
    #: False: the index was not complete (being rebuilt, or emptied), so
    #: nothing was compared (what it lacks then is no drift)
    complete: bool = True


def drift(
    index: RedisIndex,
    store: SchedulerStore,
    task_type: str,
    *,
    after_id: int = 0,
    limit: int = 1000,
    only_complete: bool = True,
) -> Drift:
    """Compare a page of the type's waiting tasks (ids after ``after_id``)
    with their index entries and repair those that differ. Paging through
    the whole table, a page per call, measures and repairs all drift.
    Nothing is compared while the index is not complete (``complete`` is
    then False): a rebuild is filling it, and its gaps are no drift
    (``only_complete=False``: compared all the same, as for an index whose
    every entry was filed by writes, never by a rebuild)."""
    criteria = TaskFilter(type=task_type, status=[TaskStatus.WAITING])
    tasks = store.search_tasks(criteria, after_id=after_id, limit=limit)
    if not tasks:
        return Drift(0, 0, 0, 0)
    keys = index.keys(task_type)
    ids = [str(t.id) for t in tasks]
    try:
        pipe = index.client.pipeline(transaction=False)
        pipe.hget(keys.state, "synced")
        pipe.hmget(keys.meta, ids)
        for member in ids:
            pipe.zscore(keys.wait, member)
        pipe.hget(keys.state, "synced")
        before, metas, *scores, after = pipe.execute()
    except redis.RedisError as exc:
        raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc
    if only_complete and (before != b"1" or after != b"1"):
        return Drift(0, 0, 0, 0, complete=False)
    suspects = []
    for task, meta, score in zip(tasks, metas, scores, strict=True):
        expected = entry(task)
        assert expected is not None
        if (
            meta is None
            or meta.decode() != expected[2]
            or (score is not None and score != expected[1])
        ):
            suspects.append(task.id or 0)
    if not suspects:
        return Drift(len(tasks), 0, 0, tasks[-1].id or after_id)
    # read again: a task claimed (or changed) since the page was read is
    # not drift, and must not be filed from the page's old state
    fresh = {t.id: t for t in store.get_tasks(suspects)}
    missing, wrong, fix = 0, 0, []
    for task, meta in zip(tasks, metas, strict=True):
        now = fresh.get(task.id)
        if now is None or now != task:
            continue
        fix.append(now)
        if meta is None:
            missing += 1
        else:
            wrong += 1
    if fix:
        index.put(task_type, fix)
    return Drift(len(tasks), missing, wrong, tasks[-1].id or after_id)


@dataclass(frozen=True)
class Strays:
    """What :func:`strays` found in one slice of the index's entries."""

    #: entries looked at
    scanned: int
    #: entries of tasks no longer waiting (or gone), taken out
    removed: int
    #: where the next slice starts (0: the scan is done)
    cursor: int
    complete: bool = True


def strays(
    index: RedisIndex, store: SchedulerStore, task_type: str, *, cursor: int = 0, count: int = 1000
) -> Strays:
    """Look at a slice of the type's index entries (from ``cursor``) and
    take out those of tasks the database no longer holds waiting in this
    type: disabled, finished one-shots, deleted, moved to another type
    while no write filed them. A task written waiting again meanwhile is
    filed again (read once more after the removal). Nothing is done while
    the index is not complete."""
    if not index.is_complete(task_type):
        return Strays(0, 0, 0, complete=False)
    after, ids = index.scan_entries(task_type, cursor, count=count)
    if not ids:
        return Strays(0, 0, after)
    held = {t.id: t for t in store.get_tasks(ids)}
    out = [
        i
        for i in ids
        if (t := held.get(i)) is None or t.status is not TaskStatus.WAITING or t.type != task_type
    ]
    again: list[Task] = []
    if out:
        index.remove(task_type, out)
        again = [t for t in store.get_tasks(out) if t.status is TaskStatus.WAITING]
        file_tasks(index, again)
    return Strays(len(ids), len(out) - len(again), after)
