"""Jobs by key (:mod:`..jobs`) over the task methods, each change in one
transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput
from ..domain.model import RunStatus, Task, TaskStatus
from ..intake.jobs import SEPARATOR, Job, JobInstant, JobView, job_key_of
from .interface import TaskFilter
from .sql_base import SQLBase, _chunks
from .tables import task as task_t
from .tables import task_run as run_t

#: statuses of an instant that may not have run: what a replacement or a
#: delete cancels, a dispatched one only if its run has not started
#: (:meth:`JobMethods._cancel_unstarted`)
_NOT_RUN = (TaskStatus.WAITING, TaskStatus.SCHEDULED)


class JobMethods(SQLBase):
    """``put_job``, ``get_job``, ``delete_job`` of :class:`SchedulerStore`."""

    def _job_tasks(self, key: str) -> dict[datetime, Task]:
        store: Any = self
        found: dict[datetime, Task] = {}
        criteria = TaskFilter(key_prefix=f"{key}{SEPARATOR}")
        after = 0
        while page := store.search_tasks(criteria, after_id=after, limit=1000):
            after = page[-1].id or 0
            for task in page:
                if job_key_of(task.key) == key:
                    found[datetime.fromisoformat(task.key.rpartition(SEPARATOR)[2])] = task
        return found

    def _job_view(self, key: str, tasks: dict[datetime, Task], **changes: Any) -> JobView:
        store: Any = self
        instants = []
        for at in sorted(tasks):
            runs = store.get_task_runs(tasks[at].id or 0, limit=1)
            instants.append(JobInstant(at, tasks[at], runs[0] if runs else None))
        return JobView(key, tuple(instants), **changes)

    def put_job(self, job: Job, *, now: datetime) -> JobView:
        store: Any = self
        with store.transaction() as tx:
            # concurrent changes of one key, one after the other: each sees
            # what the one before wrote (an identical PUT then keeps it all)
            tx._serialise("lock the job", f"job:{job.key}")
            name = job.callback.task_type
            task_type = tx.get_task_type(name)
            if task_type is None:
                raise InvalidInput(
                    "callback.type",
                    f"a {job.callback.type} callback runs as task type {name!r}, which is "
                    "not registered (swh scheduler task-type register)",
                )
            existing = tx._job_tasks(job.key)
            wanted = set(job.schedules)
            gone = [t for at, t in existing.items() if at not in wanted and t.status in _NOT_RUN]
            cancelled = tx._cancel_unstarted(gone, now)
            cancelled_ids = {c.id for c in cancelled}
            kept = [at for at in job.schedules if at in existing]
            for at in kept:
                tx._keep(job, at, existing[at], now)
            added = [at for at in job.schedules if at not in existing]
            retries = task_type.num_retries or 0
            tx.create_tasks([job.task(at, now, retries=retries) for at in added], now=now)
            view: JobView = tx._job_view(
                job.key,
                tx._job_tasks(job.key),
                added=tuple(added),
                removed=tuple(t_at for t_at, t in existing.items() if t.id in cancelled_ids),
                kept=tuple(kept),
                cancelled_runs=tx._cancelled_runs(cancelled),
            )
        return view

    def _cancel_unstarted(self, tasks: list[Task], now: datetime) -> list[Task]:
        """Cancel the instants among ``tasks`` that have not started; returns
        those cancelled. Their statuses are read again as each statement
        locks them (a runner may have dispatched one since ``tasks`` were
        read): a waiting one is cancelled first (a runner skips it from
        then on); then a dispatched one only if its run is still
        ``scheduled``: that run is ended ``cancelled``, then the task, row
        by row in the order the start guard locks them (run, then task).
        Either the guard started the run before, and the instant goes on
        (``running``, then ``done``: its callback is being made), or the
        run is cancelled first and the guard refuses to start it."""
        store: Any = self
        ids = sorted({t.id for t in tasks if t.id})
        values = {"status": TaskStatus.CANCELLED.value, "updated_at": now}
        with store._write("cancel a job's instants") as conn:
            waiting = task_t.c.status == TaskStatus.WAITING.value
            cancelled: list[Task] = store._update_tasks(conn, ids, waiting, values)
            done = {t.id for t in cancelled}
            for chunk in _chunks([i for i in ids if i not in done]):
                stopped = conn.scalars(
                    sa.update(run_t)
                    .where(
                        run_t.c.task_id.in_(chunk),
                        run_t.c.status == RunStatus.SCHEDULED.value,
                    )
                    .values(status=RunStatus.CANCELLED.value, ended=now)
                    .returning(run_t.c.task_id)
                ).all()
                dispatched = task_t.c.status == TaskStatus.SCHEDULED.value
                cancelled += store._update_tasks(conn, sorted(set(stopped)), dispatched, values)
        return cancelled

    def _keep(self, job: Job, at: datetime, task: Task, now: datetime) -> None:
        """An instant given again: cancelled before, it is scheduled again; not
        run yet, it takes the job's callback (a dispatched one keeps the
        message already queued); run, it stays as it is."""
        store: Any = self
        if task.status is TaskStatus.CANCELLED:
            store.respawn_tasks([task.id], next_run=at, now=now)
            task = store.get_tasks([task.id])[0]
        if task.status is not TaskStatus.WAITING:
            return
        fresh = job.task(at, now)
        if (fresh.type, fresh.kwargs, fresh.priority, fresh.max_delay) != (
            task.type,
            task.kwargs,
            task.priority,
            task.max_delay,
        ):
            changed = task.updated(
                type=fresh.type,
                kwargs=fresh.kwargs,
                priority=fresh.priority,
                max_delay=fresh.max_delay,
                deadline=max(task.next_run, fresh.deadline),
                updated_at=now,
            )
            store.update_task(changed, expected_updated_at=task.updated_at)

    def _cancelled_runs(self, tasks: list[Task]) -> tuple[str, ...]:
        store: Any = self
        runs = [r for t in tasks for r in store.get_task_runs(t.id or 0, limit=1)]
        return tuple(
            r.backend_id for r in runs if r.status is RunStatus.CANCELLED and not r.started
        )

    def get_job(self, key: str) -> JobView | None:
        tasks = self._job_tasks(key)
        return self._job_view(key, tasks) if tasks else None

    def delete_job(self, key: str, *, now: datetime) -> JobView | None:
        store: Any = self
        with store.transaction() as tx:
            tx._serialise("lock the job", f"job:{key}")
            existing = tx._job_tasks(key)
            if not existing:
                return None
            gone = [t for t in existing.values() if t.status in _NOT_RUN]
            cancelled = tx._cancel_unstarted(gone, now)
            cancelled_ids = {c.id for c in cancelled}
            view: JobView = tx._job_view(
                key,
                tx._job_tasks(key),
                removed=tuple(at for at, t in existing.items() if t.id in cancelled_ids),
                cancelled_runs=tx._cancelled_runs(cancelled),
            )
        return view
