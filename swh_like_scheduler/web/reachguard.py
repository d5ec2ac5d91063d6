"""The callback rule at the store's writing methods, for every door at once.

The doors that build tasks from raw input check a callback URL as they
parse it (:func:`.builders.task_from_input`, :func:`.jobs.job_from_input`).
Other doors hand the store tasks and changes already made: ``/rpc``
(``create_tasks``, ``import_tasks``, ``update_task``, ``edit_task``,
``put_job``), an edit's changes (``PATCH /tasks/{id}``, ``swh scheduler
task edit``). :class:`ReachGuard` wraps a store (any: SQL, remote, indexed)
and checks those methods' arguments before the wrapped store is called:
a ``webhook`` task's URL (:func:`.argcheck.check_callback_url`) and a job's
``http`` callback must go where the :class:`~.reach.Reach` given allows, or
:class:`~.exceptions.InvalidInput` names the field (``tasks[0].kwargs.url``,
``kwargs.url``, ``callback.data.url``) and nothing is written.

Every other attribute is the wrapped store's; the methods checked keep the
store interface's signatures, which ``/rpc`` reads to check a call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from ..domain.exceptions import InvalidInput
from ..domain.model import Task
from ..intake.argcheck import check_callback_url
from ..intake.jobs import Job, JobView
from ..plumbing.reach import Reach
from ..store.values import ImportSummary

#: the attributes of the wrapper itself (any other is the wrapped store's)
_OWN = frozenset({"store", "reach"})


class ReachGuard:
    """``store`` with callback URLs checked against ``reach`` (module doc)."""

    def __init__(self, store: Any, reach: Reach) -> None:
        self.store = store
        self.reach = reach

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # settings of the store (``max_argument_bytes``...) are the wrapped one's
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.store, name, value)

    def _backend(self, types: dict[str, str | None], name: str) -> str | None:
        if name not in types:
            found = self.store.get_task_type(name)
            types[name] = None if found is None else found.backend_name
        return types[name]

    def _check_tasks(self, tasks: Iterable[Task], where: str) -> Iterator[Task]:
        types: dict[str, str | None] = {}
        for index, task in enumerate(tasks):
            if isinstance(task, Task):
                check_callback_url(
                    task.type,
                    self._backend(types, task.type),
                    task.args,
                    task.kwargs,
                    self.reach,
                    where=f"{where}[{index}].",
                )
            yield task

    def create_tasks(self, tasks: Iterable[Task], *, now: datetime) -> list[Task]:
        checked = list(self._check_tasks(tasks, "tasks"))
        created: list[Task] = self.store.create_tasks(checked, now=now)
        return created

    def import_tasks(
        self,
        tasks: Iterable[Task],
        *,
        now: datetime,
        batch_size: int = 1000,
        progress: Callable[[int, int], None] | None = None,
    ) -> ImportSummary:
        # checked as the store reads the stream: a refusal aborts the import
        summary: ImportSummary = self.store.import_tasks(
            self._check_tasks(tasks, "tasks"), now=now, batch_size=batch_size, progress=progress
        )
        return summary

    def update_task(self, task: Task, *, expected_updated_at: datetime | None = None) -> Task:
        if isinstance(task, Task):
            types: dict[str, str | None] = {}
            backend = self._backend(types, task.type)
            check_callback_url(
                task.type, backend, task.args, task.kwargs, self.reach, where="task."
            )
        updated: Task = self.store.update_task(task, expected_updated_at=expected_updated_at)
        return updated

    def edit_task(
        self,
        *,
        task_id: int | None = None,
        key: str | None = None,
        changes: Mapping[str, Any],
        now: datetime,
    ) -> Task:
        if isinstance(changes, Mapping) and ("args" in changes or "kwargs" in changes):
            current = self._current(task_id, key)
            if current is not None:
                args = changes.get("args")
                kwargs = changes.get("kwargs")
                check_callback_url(
                    current.type,
                    self._backend({}, current.type),
                    current.args if args is None else args,
                    current.kwargs if kwargs is None else kwargs,
                    self.reach,
                )
        edited: Task = self.store.edit_task(task_id=task_id, key=key, changes=changes, now=now)
        return edited

    def _current(self, task_id: int | None, key: str | None) -> Task | None:
        """The task an edit names (``None``: the store says what is wrong)."""
        if task_id is not None:
            found = self.store.get_tasks([task_id])
            return found[0] if found else None
        if key is not None:
            task: Task | None = self.store.get_task_by_key(key)
            return task
        return None

    def put_job(self, job: Job, *, now: datetime) -> JobView:
        if isinstance(job, Job) and job.callback.type == "http":
            problem = self.reach.problem(str(job.callback.data.get("url")))
            if problem is not None:
                raise InvalidInput("callback.data.url", problem)
        view: JobView = self.store.put_job(job, now=now)
        return view


def guarded(store: Any, reach: Reach) -> Any:
    """``store`` wrapped in a :class:`ReachGuard` (once: a guarded store is
    guarded again with the new ``reach``)."""
    if isinstance(store, ReachGuard):
        return ReachGuard(store.store, reach)
    return ReachGuard(store, reach)


__all__ = ["ReachGuard", "guarded"]
