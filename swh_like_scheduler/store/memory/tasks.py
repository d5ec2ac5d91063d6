"""Task types and tasks in memory: the :class:`~..role_tasks.TaskStore`
role, with the semantics its protocol documents (the SQL store's
:mod:`..sql_tasks` is the other implementation)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from ...domain.exceptions import (
    Conflict,
    DuplicateTaskType,
    InvalidInput,
    KeyConflict,
    NotFound,
    UnknownTaskType,
)
from ...domain.model import (
    PRIORITY_ORDER,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskStatus,
    TaskType,
)
from ...policy import with_default_cooldown
from ..definitions import moved_instant, same_definition
from ..values import ALL_TASKS, ImportSummary, TaskFilter, WaitingEntry
from .base import MemoryBase
from .indexes import LIVE
from .state import identity_key

#: the fields of a task a store keeps as they are (the arguments apart)
_SKIPPED = {"args", "kwargs", "_arguments_hash", "_arguments_size"}


def as_stored(task: Task, **changes: Any) -> Task:
    """``task`` with ``changes`` as a store would give it back: its
    arguments through JSON (tuples become lists, as from a database) when
    they hold anything JSON would change."""
    values = {k: v for k, v in vars(task).items() if k not in _SKIPPED}
    values.update(changes)
    args, kwargs = task.args, task.kwargs
    if not (all(map(_plain, args)) and all(map(_plain, kwargs.values()))):
        arguments = json.loads(json.dumps(task.arguments))
        args, kwargs = arguments["args"], arguments["kwargs"]
    values["args"] = tuple(args)
    values["kwargs"] = dict(kwargs)
    return Task.stored(values, arguments_hash=task.arguments_hash)


#: the values JSON gives back as they are (``True`` is an ``int``: also kept)
_SCALARS = (str, int, type(None))


def _plain(value: Any) -> bool:
    """Whether JSON gives ``value`` back equal and of the same type (a
    float may not: ``nan``, ``-0.0`` round trip, but a list of lists does)."""
    if isinstance(value, _SCALARS):
        return True
    if type(value) is list:
        return all(map(_plain, value))
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


class TaskMethods(MemoryBase):
    """Task types, task creation (idempotent), queries and status changes."""

    # -- task types ---------------------------------------------------------

    def create_task_type(self, task_type: TaskType) -> TaskType:
        with self._write("create task type"):
            if task_type.type in self._state.types:
                raise DuplicateTaskType(task_type.type)
            self._state.put_type(task_type)
        return task_type

    def get_task_type(self, name: str) -> TaskType | None:
        with self._state.lock:  # (never in the middle of another thread's write)
            return self._state.types.get(name)

    def get_task_types(self) -> list[TaskType]:
        with self._state.lock:
            return [self._state.types[name] for name in sorted(self._state.types)]

    def pause_task_type(self, name: str, *, now: datetime) -> TaskType:
        if now.tzinfo is None or now.utcoffset() is None:
            raise InvalidInput("now", f"{now.isoformat()} has no time zone")
        return self._set_paused(name, now.astimezone(UTC), "pause task type")

    def resume_task_type(self, name: str) -> TaskType:
        return self._set_paused(name, None, "resume task type")

    def _set_paused(self, name: str, at: datetime | None, where: str) -> TaskType:
        with self._write(where):
            current = self._state.types.get(name)
            if current is None:
                raise UnknownTaskType(name)
            if at is not None and current.paused_at is not None:
                return current  # paused already: the first instant stays
            changed = replace(current, paused_at=at)
            if changed != current:
                self._state.put_type(changed)
                if at is None:
                    self._announce([name])
            return changed

    # -- tasks --------------------------------------------------------------

    def create_tasks(self, tasks: Iterable[Task], *, now: datetime) -> list[Task]:
        batch = list(tasks)
        if not batch:
            return []
        with self._write("create tasks"):
            return self._create_batch(batch, now)[0]

    def import_tasks(
        self,
        tasks: Iterable[Task],
        *,
        now: datetime,
        batch_size: int = 1000,
        progress: Callable[[int, int], None] | None = None,
    ) -> ImportSummary:
        created = existing = 0
        with self._write("import tasks"):
            iterator = iter(tasks)
            while batch := list(islice(iterator, batch_size)):
                fresh = self._create_batch(batch, now)[1]
                created += fresh
                existing += len(batch) - fresh
                if progress is not None:
                    progress(created, existing)
        return ImportSummary(created=created, existing=existing)

    def _create_batch(self, batch: list[Task], now: datetime) -> tuple[list[Task], int]:
        """Create ``batch`` in the write under way: (tasks in order, number new)."""
        state = self._state
        for item in batch:
            if item.id is not None:
                raise InvalidInput("id", f"a new task cannot have an id (got {item.id})")
            item.check_arguments_size(self.max_argument_bytes)
            item.check_arguments_depth()
        for name in sorted({t.type for t in batch} - set(state.types)):
            raise UnknownTaskType(name)
        found: list[Task | None] = [None] * len(batch)
        first_key: dict[str, int] = {}
        first_same: dict[tuple[str, str, str, str], int] = {}
        created = 0
        for i, item in enumerate(batch):
            if item.key is not None:
                known_id = state.keys.get(item.key)
                known = state.tasks.get(known_id) if known_id is not None else None
                if known is None and item.key in first_key:
                    known = found[first_key[item.key]]
                if known is not None:
                    if not same_definition(known, item) or moved_instant(known, item):
                        raise KeyConflict(item.key, known.id or 0)
                    found[i] = known
                    continue
                first_key[item.key] = i
            else:
                same = identity_key(item)  # whatever its status: the live task it equals
                known_id = state.identities.get(same)
                if known_id is not None:
                    found[i] = state.tasks[known_id]
                    continue
                if same in first_same:
                    found[i] = found[first_same[same]]
                    continue
                first_same[same] = i
            new = as_stored(
                with_default_cooldown(item),
                id=state.next_id("task"),
                created_at=now,
                updated_at=now,
            )
            state.put_task(new)
            found[i] = new
            created += 1
            self._announce([new.type])
        return [t for t in found if t is not None], created

    def get_tasks(self, ids: Sequence[int]) -> list[Task]:
        tasks = self._state.tasks
        with self._state.lock:
            return [tasks[i] for i in ids if i in tasks]

    def get_task_by_key(self, key: str) -> Task | None:
        with self._state.lock:
            task_id = self._state.keys.get(key)
            return self._state.tasks.get(task_id) if task_id is not None else None

    def search_tasks(
        self, criteria: TaskFilter = ALL_TASKS, *, after_id: int = 0, limit: int = 100
    ) -> list[Task]:
        if limit <= 0:
            raise InvalidInput("limit", f"{limit} must be a positive number")
        match = _matcher(criteria)
        with self._state.lock:
            ids = sorted(i for i in self._state.tasks if i > after_id)
            found: list[Task] = []
            for task_id in ids:
                task = self._state.tasks[task_id]
                if match(task):
                    found.append(task)
                    if len(found) == limit:
                        break
            return found

    def waiting_entries(
        self,
        task_type: str,
        priority: Priority,
        *,
        after: tuple[datetime, int] | None = None,
        until: tuple[datetime, int] | None = None,
        limit: int = 10_000,
    ) -> list[WaitingEntry]:
        if limit <= 0:
            raise InvalidInput("limit", f"{limit} must be a positive number")
        state = self._state
        found: list[WaitingEntry] = []
        with state.lock:
            for task in state.waiting(state.indexes.by_deadline(task_type, priority)):
                key = (task.deadline, task.id or 0)
                if until is not None and key > until:
                    break
                if after is None or key > after:
                    found.append(WaitingEntry(task.id or 0, task.next_run, task.deadline))
                    if len(found) == limit:
                        break
        return found

    def count_tasks(self, criteria: TaskFilter = ALL_TASKS) -> int:
        match = _matcher(criteria)
        with self._state.lock:
            return sum(1 for task in self._state.tasks.values() if match(task))

    def next_ready_time(
        self, task_type: str, *, priorities: Sequence[Priority] | None = None
    ) -> datetime | None:
        wanted = set(priorities) if priorities else set(PRIORITY_ORDER)
        indexes = self._state.indexes
        with self._state.lock:
            times = (indexes.earliest(task_type, p) for p in PRIORITY_ORDER if p in wanted)
            return min((t for t in times if t is not None), default=None)

    def list_pending(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int = 100,
        priorities: Sequence[Priority] | None = None,
    ) -> list[Task]:
        if limit < 1:
            raise InvalidInput("limit", f"{limit} must be a positive number")
        wanted = set(priorities) if priorities else set(PRIORITY_ORDER)
        state = self._state
        chosen: list[Task] = []
        with state.lock:
            for priority in PRIORITY_ORDER:
                if priority in wanted and len(chosen) < limit:
                    ready = list(state.waiting(state.indexes.ready(task_type, priority, now)))
                    ready.sort(key=lambda t: (t.deadline, t.id or 0))
                    chosen.extend(ready[: limit - len(chosen)])
        return chosen

    def _change(
        self,
        where: str,
        ids: Sequence[int],
        allowed: Callable[[Task], bool],
        change: Callable[[Task], Task],
    ) -> list[Task]:
        """``change`` each task of ``ids`` that is ``allowed``, in the order given."""
        changed: list[Task] = []
        with self._write(where):
            for task_id in dict.fromkeys(ids):
                task = self._state.tasks.get(task_id)
                if task is not None and allowed(task):
                    after = change(task)
                    self._state.put_task(after)
                    changed.append(after)
        return changed

    def disable_tasks(self, ids: Sequence[int], *, now: datetime) -> list[Task]:
        return self._change(
            "disable tasks",
            ids,
            lambda t: t.status in LIVE,
            lambda t: t.updated(status=TaskStatus.DISABLED, updated_at=now),
        )

    def enable_tasks(self, ids: Sequence[int], *, now: datetime) -> list[Task]:
        enabled = self._change(
            "enable tasks",
            ids,
            lambda t: t.status is TaskStatus.DISABLED,
            lambda t: t.updated(status=TaskStatus.WAITING, updated_at=now),
        )
        self._announce(t.type for t in enabled)
        return enabled

    def cancel_tasks(self, ids: Sequence[int], *, now: datetime) -> list[Task]:
        with self._write("cancel tasks"):
            cancelled = self._change(
                "cancel tasks",
                ids,
                lambda t: t.status in _CANCELLABLE,
                lambda t: t.updated(status=TaskStatus.CANCELLED, updated_at=now),
            )
            for task in cancelled:
                for run in self._state.runs_of(task.id or 0):
                    if run.status is RunStatus.SCHEDULED:
                        self._state.put_run(replace(run, status=RunStatus.CANCELLED, ended=now))
        return cancelled

    def respawn_tasks(self, ids: Sequence[int], *, next_run: datetime, now: datetime) -> list[Task]:
        types = self._state.types

        def respawned(task: Task) -> Task:
            retries = types[task.type].num_retries or 0
            return task.updated(
                status=TaskStatus.WAITING,
                next_run=next_run,
                deadline=next_run,
                failure_count=0,
                retries_left=retries,
                updated_at=now,
            )

        done = self._change(
            "respawn tasks", ids, lambda t: t.status is not TaskStatus.SCHEDULED, respawned
        )
        self._announce(t.type for t in done)
        return done

    def delete_tasks(self, ids: Sequence[int]) -> int:
        deleted = 0
        with self._write("delete tasks"):
            for task_id in dict.fromkeys(ids):
                if task_id in self._state.tasks:
                    self._state.drop_task(task_id)
                    deleted += 1
        return deleted

    def update_task(self, task: Task, *, expected_updated_at: datetime | None = None) -> Task:
        if task.id is None:
            raise InvalidInput("id", "only a stored task (with an id) can be updated")
        task.check_arguments_size(self.max_argument_bytes)
        task.check_arguments_depth()
        with self._write("update task"):
            current = self._state.tasks.get(task.id)
            if current is None:
                raise NotFound(f"no task {task.id}")
            if expected_updated_at is not None and current.updated_at != expected_updated_at:
                raise Conflict(
                    f"task {task.id} was changed by someone else; read it again and retry"
                )
            self._state.put_task(as_stored(task))
        return task


_CANCELLABLE = (TaskStatus.WAITING, TaskStatus.SCHEDULED, TaskStatus.DISABLED)


def _matcher(criteria: TaskFilter) -> Callable[[Task], bool]:
    """Whether a task matches ``criteria`` (as the SQL store's ``WHERE``)."""
    statuses = None if criteria.status is None else {TaskStatus(s) for s in criteria.status}
    priority = None if criteria.priority is None else Priority(criteria.priority)
    kind = None if criteria.schedule_kind is None else ScheduleKind(criteria.schedule_kind)
    prefix, before = criteria.key_prefix, criteria.next_run_before

    def match(task: Task) -> bool:
        return (
            (criteria.type is None or task.type == criteria.type)
            and (statuses is None or task.status in statuses)
            and (priority is None or task.priority is priority)
            and (kind is None or task.schedule_kind is kind)
            and (prefix is None or (task.key is not None and task.key.startswith(prefix)))
            and (before is None or task.next_run <= before)
        )

    return match
