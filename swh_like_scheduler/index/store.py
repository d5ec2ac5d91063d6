"""A store that keeps the Redis index in line with its writes.

:class:`IndexedStore` wraps a store: every method is the wrapped store's,
and those that change when tasks are ready (creation, outcomes, leases
released or stolen, monitor duties, operator actions, jobs, claims) file
the tasks they touched in
the index once the database has committed. An index write that fails is
logged and skipped: the database is already right, and what the index then
lacks is still dispatched (a runner whose index claim came short also
claims from the database) and repaired (:func:`.sync.drift`): so do the
writes of processes not given the index.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from ..domain.model import Task, TaskRun
from ..policy.type_edit import retime_scope
from .redis_index import IndexUnavailable, RedisIndex
from .sync import file_tasks

logger = logging.getLogger(__name__)

#: at most one log line per this many seconds about failed index writes
LOG_EVERY = 30.0
#: the attributes of the wrapper itself (any other is the wrapped store's)
_OWN = frozenset({"store", "index", "write_failures", "invalidated", "_logged"})


class IndexedStore:
    """``store`` with ``index`` kept in line (see the module doc)."""

    def __init__(self, store: Any, index: RedisIndex) -> None:
        self.store = store
        self.index = index
        self.write_failures = 0
        #: types whose index an import invalidated (to rebuild)
        self.invalidated: set[str] = set()
        self._logged = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # settings of the store (``max_argument_bytes``...) are the wrapped one's
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.store, name, value)

    # -- filing ---------------------------------------------------------------

    def _safely(self, what: str, write: Callable[[], object]) -> None:
        try:
            write()
        except IndexUnavailable as exc:
            self.write_failures += 1
            if time.monotonic() - self._logged >= LOG_EVERY:
                self._logged = time.monotonic()
                logger.warning(
                    "index not updated after %s (%d failures so far; the database is "
                    "right and the runners claim from it what the index lacks): %s",
                    what,
                    self.write_failures,
                    exc,
                )

    def _file(self, what: str, tasks: Iterable[Task]) -> None:
        batch = list(tasks)
        if batch:
            self._safely(what, lambda: file_tasks(self.index, batch))

    def _refile(self, what: str, task_ids: Iterable[int]) -> None:
        ids = sorted(set(task_ids))
        if ids:
            self._file(what, self.store.get_tasks(ids))

    def _runs(self, what: str, runs: Iterable[TaskRun | None]) -> None:
        self._refile(what, (r.task_id for r in runs if r is not None))

    # -- tasks ----------------------------------------------------------------

    def create_tasks(self, tasks: Iterable[Task], **kwargs: Any) -> list[Task]:
        created: list[Task] = self.store.create_tasks(tasks, **kwargs)
        self._file("creating tasks", created)
        return created

    def import_tasks(self, tasks: Iterable[Task], **kwargs: Any) -> Any:
        types: set[str] = set()

        def seen() -> Iterable[Task]:
            for task in tasks:
                types.add(task.type)
                yield task

        summary = self.store.import_tasks(seen(), **kwargs)
        # too many to file one by one: the types' indexes are rebuilt
        for name in sorted(types):
            self.invalidated.add(name)
            self._safely("an import", partial(self.index.invalidate, name))
        return summary

    def update_task_type(self, name: str, **kwargs: Any) -> Any:
        before = self.store.get_task_type(name)
        updated = self.store.update_task_type(name, **kwargs)
        if before is not None and retime_scope(before, updated) is not None:
            # the edit may have moved the stored times of many of its tasks
            # (a retry policy, a default interval): the type's index is rebuilt
            self.invalidated.add(name)
            self._safely("a type edit", partial(self.index.invalidate, name))
        return updated

    def update_task(self, task: Task, **kwargs: Any) -> Task:
        updated: Task = self.store.update_task(task, **kwargs)
        self._file("updating a task", [updated])
        return updated

    def edit_task(self, **kwargs: Any) -> Task:
        edited: Task = self.store.edit_task(**kwargs)
        self._file("editing a task", [edited])
        return edited

    def _action(self, name: str, ids: Sequence[int], **kwargs: Any) -> list[Task]:
        done: list[Task] = getattr(self.store, name)(ids, **kwargs)
        self._file(name.replace("_", " "), done)
        return done

    def disable_tasks(self, ids: Sequence[int], **kwargs: Any) -> list[Task]:
        return self._action("disable_tasks", ids, **kwargs)

    def enable_tasks(self, ids: Sequence[int], **kwargs: Any) -> list[Task]:
        return self._action("enable_tasks", ids, **kwargs)

    def cancel_tasks(self, ids: Sequence[int], **kwargs: Any) -> list[Task]:
        return self._action("cancel_tasks", ids, **kwargs)

    def respawn_tasks(self, ids: Sequence[int], **kwargs: Any) -> list[Task]:
        return self._action("respawn_tasks", ids, **kwargs)

    def delete_tasks(self, ids: Sequence[int]) -> int:
        before: list[Task] = self.store.get_tasks(list(ids))
        deleted: int = self.store.delete_tasks(ids)
        by_type: dict[str, list[int]] = defaultdict(list)
        for task in before:
            by_type[task.type].append(task.id or 0)
        for name, gone in by_type.items():
            self._safely("deleting tasks", partial(self.index.remove, name, gone))
        return deleted

    def apply_bulk(self, action: Any, criteria: Any, **kwargs: Any) -> Any:
        report = self.store.apply_bulk(action, criteria, **kwargs)
        if report.changed_ids and str(report.action) == "delete":
            gone = list(report.changed_ids)
            for name in report.types:
                self._safely("deleting tasks", partial(self.index.remove, name, gone))
        else:
            self._refile(f"a bulk {report.action}", report.changed_ids)
        return report

    # -- runs -----------------------------------------------------------------

    def claim_ready_tasks(self, task_type: str, **kwargs: Any) -> Any:
        claimed = self.store.claim_ready_tasks(task_type, **kwargs)
        if claimed:
            ids = [c.task_id for c in claimed]
            self._safely("a claim", lambda: self.index.remove(task_type, ids))
        return claimed

    def skip_missed_firings(self, task_type: str, **kwargs: Any) -> Any:
        skips = self.store.skip_missed_firings(task_type, **kwargs)
        self._file("skipping missed firings", [s.task for s in skips])
        return skips

    def schedule_task_run(self, task_id: int, **kwargs: Any) -> TaskRun:
        run: TaskRun = self.store.schedule_task_run(task_id, **kwargs)
        self._refile("scheduling a run", [task_id])
        return run

    def end_task_run(self, backend_id: str, **kwargs: Any) -> TaskRun | None:
        run: TaskRun | None = self.store.end_task_run(backend_id, **kwargs)
        self._runs("recording an outcome", [run])
        return run

    def end_task_runs(self, ends: Any, **kwargs: Any) -> list[TaskRun | None]:
        runs: list[TaskRun | None] = self.store.end_task_runs(ends, **kwargs)
        self._runs("recording outcomes", runs)
        return runs

    def end_worker_runs(self, *args: Any, **kwargs: Any) -> Any:
        runs = self.store.end_worker_runs(*args, **kwargs)
        self._runs("ending a worker's runs", runs)
        return runs

    def guard_start(self, backend_id: str, **kwargs: Any) -> Any:
        grant = self.store.guard_start(backend_id, **kwargs)
        self._grant("a start refused", grant)
        return grant

    def acquire_lease(self, backend_id: str, **kwargs: Any) -> Any:
        grant = self.store.acquire_lease(backend_id, **kwargs)
        self._grant("a lease refused", grant)
        return grant

    def _grant(self, what: str, grant: Any) -> None:
        # a refusal may end the run and leave its task waiting again
        if not grant.granted and grant.task is not None:
            self._file(what, [grant.task])

    def finish_lease(self, backend_id: str, **kwargs: Any) -> TaskRun | None:
        run: TaskRun | None = self.store.finish_lease(backend_id, **kwargs)
        self._runs("finishing a lease", [run])
        return run

    def yield_lease(self, backend_id: str, **kwargs: Any) -> TaskRun | None:
        run: TaskRun | None = self.store.yield_lease(backend_id, **kwargs)
        self._runs("yielding a lease", [run])
        return run

    # -- monitor duties -------------------------------------------------------

    def steal_expired_leases(self, **kwargs: Any) -> Any:
        report = self.store.steal_expired_leases(**kwargs)
        self._runs("stealing leases", report.stolen)
        return report

    def sweep_silent_workers(self, **kwargs: Any) -> Any:
        sweep = self.store.sweep_silent_workers(**kwargs)
        self._runs("ending the runs of silent workers", sweep.lost)
        return sweep

    def expire_oneshot_tasks(self, **kwargs: Any) -> Any:
        expired = self.store.expire_oneshot_tasks(**kwargs)
        self._file("expiring one-shot tasks", [e.task for e in expired])
        return expired

    # -- jobs -----------------------------------------------------------------

    def put_job(self, job: Any, **kwargs: Any) -> Any:
        view = self.store.put_job(job, **kwargs)
        self._file("putting a job", [i.task for i in view.instants])
        return view

    def delete_job(self, key: str, **kwargs: Any) -> Any:
        view = self.store.delete_job(key, **kwargs)
        if view is not None:
            self._file("deleting a job", [i.task for i in view.instants])
        return view
