"""What the memory store holds, and how a write is undone.

Every row lives in a plain dictionary (task types by name, tasks by id,
runs by id). A write goes through :meth:`State.put` and :meth:`State.drop`,
which note the value they replace in the journal of the write under way;
a write that raises puts every noted value back, in reverse order, so a
call (or a :meth:`~.MemoryStore.transaction` block) is written whole or
not at all, as on a database.

The indexes a claim needs (the waiting tasks of each type and class by
``next_run``) are kept beside the rows and are never undone: each entry is
checked against the row it names when it is read, and an entry that no
longer matches is dropped then (see :class:`ReadyIndex`).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...domain.exceptions import Conflict
from ...domain.model import Priority, Task, TaskRun, TaskStatus, TaskType

#: a value that was not there before a write (its undo removes the key)
_ABSENT = object()


@dataclass
class Batch:
    """A dispatch batch: the runs of one claim, published or not."""

    claimed_at: datetime
    published_at: datetime | None = None


class ReadyIndex:
    """The waiting tasks of one type and class, by ``next_run``.

    ``due`` holds the ids found ready at the latest instant asked for;
    ``heap`` the ``(next_run, id)`` of the others. Entries are hints: a task
    is pushed again whenever it is written waiting, and an entry whose task
    is gone, no longer waiting, of another class or at another ``next_run``
    is dropped when it is met."""

    __slots__ = ("due", "heap")

    def __init__(self) -> None:
        self.heap: list[tuple[datetime, int]] = []
        self.due: set[int] = set()

    def push(self, task: Task) -> None:
        heapq.heappush(self.heap, (task.next_run, task.id or 0))

    def ready(self, tasks: dict[int, Task], now: datetime) -> list[Task]:
        """The waiting tasks of this index ready at ``now``."""
        heap, due = self.heap, self.due
        while heap and heap[0][0] <= now:
            next_run, task_id = heapq.heappop(heap)
            task = tasks.get(task_id)
            if task is not None and task.status is TaskStatus.WAITING and task.next_run == next_run:
                due.add(task_id)
        found: list[Task] = []
        later: list[int] = []
        for task_id in due:
            task = tasks.get(task_id)
            if task is None or task.status is not TaskStatus.WAITING:
                later.append(task_id)
            elif task.next_run > now:  # moved later since: back in the heap
                later.append(task_id)
                heapq.heappush(heap, (task.next_run, task_id))
            else:
                found.append(task)
        due.difference_update(later)
        return found

    def earliest(self, tasks: dict[int, Task]) -> datetime | None:
        """The earliest ``next_run`` of the waiting tasks of this index."""
        heap = self.heap
        while heap:
            next_run, task_id = heap[0]
            task = tasks.get(task_id)
            if task is not None and task.status is TaskStatus.WAITING and task.next_run == next_run:
                break
            heapq.heappop(heap)
        best = heap[0][0] if heap else None
        stale: list[int] = []
        for task_id in self.due:
            task = tasks.get(task_id)
            if task is None or task.status is not TaskStatus.WAITING:
                stale.append(task_id)
            elif best is None or task.next_run < best:
                best = task.next_run
        self.due.difference_update(stale)
        return best


@dataclass
class State:
    """The rows of one memory store, its counters and its indexes."""

    types: dict[str, TaskType] = field(default_factory=dict)
    tasks: dict[int, Task] = field(default_factory=dict)
    #: the fencing counter of each task (the starts a start guard granted)
    fences: dict[int, int] = field(default_factory=dict)
    #: task id by client key
    keys: dict[str, int] = field(default_factory=dict)
    #: the live task without a key of each :func:`identity`
    identities: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    runs: dict[int, TaskRun] = field(default_factory=dict)
    #: run id by backend id
    backend_ids: dict[str, int] = field(default_factory=dict)
    #: the dispatch batch of each run that has one, by run id
    run_batches: dict[int, int] = field(default_factory=dict)
    batches: dict[int, Batch] = field(default_factory=dict)
    #: the last id given, per kind of row ("task", "run", "batch")
    counters: dict[str, int] = field(default_factory=dict)
    installation: dict[str, str] = field(default_factory=dict)
    #: the waiting tasks by (type, class): hints, never undone
    ready: dict[tuple[str, Priority], ReadyIndex] = field(default_factory=dict)
    #: the run ids of each task, oldest first: hints, never undone
    task_runs: dict[int, list[int]] = field(default_factory=dict)
    #: the waiting tasks of each type by deadline: hints, never undone
    deadlines: dict[str, list[tuple[datetime, int]]] = field(default_factory=dict)
    #: the tasks of each type written ``scheduled``: hints, never undone
    scheduled: dict[str, set[int]] = field(default_factory=dict)
    #: the latest pass with room per type and class (:meth:`record_room`)
    room: dict[tuple[str, Priority], datetime] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        #: the undo journal of the write under way (``None``: no write)
        self.journal: list[tuple[dict[Any, Any], Any, Any]] | None = None
        #: what the write under way does (for its errors)
        self.where = ""

    # -- writing --------------------------------------------------------------

    @contextmanager
    def writing(self, where: str) -> Iterator[None]:
        """Hold the store for one write (``where`` names it in the errors a
        constraint raises); undo it if it raises. A write inside another (a
        transaction block) joins it."""
        with self.lock:
            if self.journal is not None:
                yield
                return
            self.journal, self.where = [], where
            try:
                yield
            except BaseException:
                self.undo()
                raise
            finally:
                self.journal = None

    def undo(self) -> None:
        """Put back every value the write under way replaced."""
        journal = self.journal or []
        for mapping, key, old in reversed(journal):
            if old is _ABSENT:
                mapping.pop(key, None)
            else:
                mapping[key] = old
        journal.clear()
        self.reindex()

    def put(self, mapping: dict[Any, Any], key: Any, value: Any) -> None:
        if self.journal is not None:
            self.journal.append((mapping, key, mapping.get(key, _ABSENT)))
        mapping[key] = value

    def drop(self, mapping: dict[Any, Any], key: Any) -> None:
        if key in mapping:
            if self.journal is not None:
                self.journal.append((mapping, key, mapping[key]))
            del mapping[key]

    def next_id(self, kind: str) -> int:
        value = self.counters.get(kind, 0) + 1
        self.put(self.counters, kind, value)
        return value

    # -- rows with indexes ------------------------------------------------------

    def put_task(self, task: Task) -> None:
        """Write ``task`` (it has an id) and file it in the indexes. Raises
        :class:`Conflict` as the database's unique indexes do: a key held by
        another task, a live task without a key identical to another."""
        task_id = task.id or 0
        old = self.tasks.get(task_id)
        if task.key is not None and self.keys.get(task.key, task_id) != task_id:
            raise Conflict(f"{self.where}: a task with this key already exists")
        if old is not None and old.key != task.key and old.key is not None:
            self.drop(self.keys, old.key)
        if task.key is not None and (old is None or old.key != task.key):
            self.put(self.keys, task.key, task_id)
        before = identity(old) if old is not None else None
        after = identity(task)
        if before != after:
            if before is not None and self.identities.get(before) == task_id:
                self.drop(self.identities, before)
            if after is not None:
                if self.identities.get(after, task_id) != task_id:
                    raise Conflict(f"{self.where}: an identical live task already exists")
                self.put(self.identities, after, task_id)
        self.put(self.tasks, task_id, task)
        self.file(task)

    def file(self, task: Task) -> None:
        """File ``task`` in the indexes of its status."""
        if task.status is TaskStatus.WAITING:
            self.index(task.type, task.priority).push(task)
            heap = self.deadlines.get(task.type)
            if heap is None:
                heap = self.deadlines[task.type] = []
            heapq.heappush(heap, (task.deadline, task.id or 0))
        elif task.status is TaskStatus.SCHEDULED:
            found = self.scheduled.get(task.type)
            if found is None:
                found = self.scheduled[task.type] = set()
            found.add(task.id or 0)

    def put_run(self, run: TaskRun) -> None:
        """Write ``run`` (it has an id)."""
        run_id = run.id or 0
        if run_id not in self.runs:
            self.task_runs.setdefault(run.task_id, []).append(run_id)
        self.put(self.runs, run_id, run)

    def index(self, type_name: str, priority: Priority) -> ReadyIndex:
        found = self.ready.get((type_name, priority))
        if found is None:
            found = self.ready[(type_name, priority)] = ReadyIndex()
        return found

    def drop_task(self, task_id: int) -> None:
        """Remove a task and its runs."""
        task = self.tasks.get(task_id)
        if task is None:
            return
        if task.key is not None:
            self.drop(self.keys, task.key)
        found = identity(task)
        if found is not None and self.identities.get(found) == task_id:
            self.drop(self.identities, found)
        for run in self.runs_of(task_id):
            self.drop_run(run)
        self.drop(self.fences, task_id)
        self.drop(self.tasks, task_id)

    def drop_run(self, run: TaskRun) -> None:
        run_id = run.id or 0
        if self.backend_ids.get(run.backend_id) == run_id:
            self.drop(self.backend_ids, run.backend_id)
        self.drop(self.run_batches, run_id)
        self.drop(self.runs, run_id)

    def scheduled_of(self, type_name: str) -> list[Task]:
        """The tasks of a type whose status is ``scheduled``."""
        ids = self.scheduled.get(type_name)
        if not ids:
            return []
        found, gone = [], []
        for task_id in ids:
            task = self.tasks.get(task_id)
            if task is not None and task.status is TaskStatus.SCHEDULED:
                found.append(task)
            else:
                gone.append(task_id)
        ids.difference_update(gone)
        return found

    def by_deadline(self, type_name: str) -> Generator[Task, None, None]:
        """The waiting tasks of a type, earliest deadline first (then id).
        Each task met is taken off the index until the walk ends: stop
        the walk with :meth:`Iterator.close` (a ``for`` loop left early
        does) and the tasks met are filed again."""
        heap = self.deadlines.get(type_name, [])
        met: list[tuple[datetime, int]] = []
        try:
            while heap:
                deadline, task_id = entry = heapq.heappop(heap)
                task = self.tasks.get(task_id)
                if (
                    task is None
                    or task.status is not TaskStatus.WAITING
                    or task.deadline != deadline
                    or (met and met[-1] == entry)
                ):
                    continue  # stale or a second entry: dropped
                met.append(entry)
                yield task
        finally:
            for entry in met:
                heapq.heappush(heap, entry)

    def runs_of(self, task_id: int) -> list[TaskRun]:
        """The runs of a task, oldest first."""
        ids = self.task_runs.get(task_id, [])
        runs = self.runs
        return [runs[i] for i in ids if i in runs and runs[i].task_id == task_id]

    def reindex(self) -> None:
        """File every waiting task again and forget runs that are gone
        (after an undo, which may have put back waiting tasks)."""
        for task in self.tasks.values():
            self.file(task)
        for task_id, ids in list(self.task_runs.items()):
            kept = [i for i in ids if i in self.runs]
            if kept:
                self.task_runs[task_id] = kept
            else:
                del self.task_runs[task_id]
        for run in self.runs.values():
            ids = self.task_runs.setdefault(run.task_id, [])
            if run.id not in ids:
                ids.append(run.id or 0)
                ids.sort()


def identity(task: Task) -> tuple[str, str, str, str] | None:
    """What makes a live task without a key the same as another (the
    database's ``ux_task_identical``); ``None`` for the other tasks."""
    if task.key is not None or task.status not in (TaskStatus.WAITING, TaskStatus.SCHEDULED):
        return None
    return (task.type, task.arguments_hash, task.schedule_kind.value, task.priority.value)
