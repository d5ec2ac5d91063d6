"""What the memory store holds, and how a write is undone.

Every row lives in a plain dictionary (task types by name, tasks by id,
runs by id). A write goes through :meth:`State.put` and :meth:`State.drop`
(or the methods for tasks and runs built on them), which note the value
they replace in the journal of the write under way; a write that raises
puts every noted value back, in reverse order, so a call (or a
:meth:`~.MemoryStore.transaction` block) is written whole or not at all,
as on a database. The indexes (:mod:`.indexes`) follow each write of a
task or a run, and are built again from the rows after an undo.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...domain.exceptions import Conflict
from ...domain.model import Priority, Task, TaskRun, TaskType
from .indexes import LIVE, Indexes

#: a value that was not there before a write (its undo removes the key)
_ABSENT = object()


@dataclass(frozen=True)
class Batch:
    """A dispatch batch: the runs of one claim, published or not."""

    claimed_at: datetime
    published_at: datetime | None = None


@dataclass
class State:
    """The rows of one memory store, its counters and its indexes."""

    types: dict[str, TaskType] = field(default_factory=dict)
    tasks: dict[int, Task] = field(default_factory=dict)
    #: task id by client key
    keys: dict[str, int] = field(default_factory=dict)
    #: the live task without a key of each :func:`identity`
    identities: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    runs: dict[int, TaskRun] = field(default_factory=dict)
    #: run id by backend id
    backend_ids: dict[str, int] = field(default_factory=dict)
    #: run id by task id and slot (a slot of a task is dispatched once)
    slots: dict[tuple[int, datetime], int] = field(default_factory=dict)
    #: the dispatch batch of each run that has one, by run id
    run_batches: dict[int, int] = field(default_factory=dict)
    batches: dict[int, Batch] = field(default_factory=dict)
    #: the last id given, per kind of row ("task", "run", "batch")
    counters: dict[str, int] = field(default_factory=dict)
    installation: dict[str, str] = field(default_factory=dict)
    #: the latest pass with room per type and class (``record_room``)
    room: dict[tuple[str, Priority], datetime] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        #: the undo journal of the write under way (``None``: no write)
        self.journal: list[tuple[dict[Any, Any], Any, Any]] | None = None
        #: what the write under way does (for its errors)
        self.where = ""
        self.indexes = Indexes()

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
        """Put back every value the write under way replaced, and build
        the indexes again from the rows."""
        journal = self.journal or []
        for mapping, key, old in reversed(journal):
            if old is _ABSENT:
                mapping.pop(key, None)
            else:
                mapping[key] = old
        journal.clear()
        task_types = {task_id: task.type for task_id, task in self.tasks.items()}
        self.indexes = Indexes.build(
            self.types, self.tasks.values(), self.runs.values(), task_types
        )

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

    def put_type(self, kind: TaskType) -> None:
        old = self.types.get(kind.type)
        self.put(self.types, kind.type, kind)
        if old is not None and old.default_interval != kind.default_interval:
            self.indexes.reshare(kind, self.tasks)

    def put_task(self, task: Task) -> None:
        """Write ``task`` (it has an id). Raises :class:`Conflict` as the
        database's unique indexes do: a key held by another task, a live
        task without a key identical to another."""
        task_id = task.id or 0
        old = self.tasks.get(task_id)
        if task.key is not None and self.keys.get(task.key, task_id) != task_id:
            raise Conflict(f"{self.where}: a task with this key already exists")
        if old is not None and old.key is not None and old.key != task.key:
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
        if old is not None:
            self.indexes.remove_task(old)
        self.indexes.add_task(task, self.types.get(task.type))

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
        self.drop(self.tasks, task_id)
        self.indexes.remove_task(task)

    def put_run(self, run: TaskRun) -> None:
        """Write ``run`` (it has an id)."""
        run_id = run.id or 0
        old = self.runs.get(run_id)
        task = self.tasks.get(run.task_id)
        type_name = task.type if task is not None else None
        self.put(self.runs, run_id, run)
        if old is not None:
            self.indexes.remove_run(old, type_name, gone=False)
        self.indexes.add_run(run, type_name)

    def drop_run(self, run: TaskRun) -> None:
        run_id = run.id or 0
        if self.backend_ids.get(run.backend_id) == run_id:
            self.drop(self.backend_ids, run.backend_id)
        if self.slots.get((run.task_id, run.slot)) == run_id:
            self.drop(self.slots, (run.task_id, run.slot))
        self.drop(self.run_batches, run_id)
        self.drop(self.runs, run_id)
        task = self.tasks.get(run.task_id)
        self.indexes.remove_run(run, task.type if task is not None else None, gone=True)

    def runs_of(self, task_id: int) -> list[TaskRun]:
        """The runs of a task, oldest first."""
        runs = self.runs
        return [runs[i] for i in self.indexes.task_runs.get(task_id, ())]

    def waiting(self, ids: Iterator[int]) -> Iterator[Task]:
        """The tasks of ``ids`` (from an index of waiting tasks)."""
        tasks = self.tasks
        return (tasks[i] for i in ids)


def identity_key(task: Task) -> tuple[str, str, str, str]:
    """What makes two tasks without a key the same task."""
    return (task.type, task.arguments_hash, task.schedule_kind.value, task.priority.value)


def identity(task: Task) -> tuple[str, str, str, str] | None:
    """The :func:`identity_key` of a live task without a key (the database's
    ``ux_task_identical``); ``None`` for the other tasks."""
    if task.key is not None or task.status not in LIVE:
        return None
    return identity_key(task)
