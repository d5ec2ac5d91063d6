"""Retention in memory: old runs, old dispatch batches and finished
one-shot tasks deleted (:class:`~..role_runs.RunStore`'s retention; the
SQL store's :mod:`..sql_runs` and :mod:`..sql_dispatch`)."""

from __future__ import annotations

from datetime import datetime

from ...domain.model import ScheduleKind, TaskStatus
from .passes import PassMethods

#: the statuses of a task that is done with (retention may delete a one-shot)
_FINISHED = (TaskStatus.COMPLETED, TaskStatus.DISABLED, TaskStatus.CANCELLED)


class RetentionMethods(PassMethods):
    """What the monitor's retention duty deletes."""

    def delete_old_runs(self, *, ended_before: datetime, limit: int = 10_000) -> int:
        state = self._state
        with self._write("delete old runs"):
            victims = [
                run
                for run in state.runs.values()
                if run.ended is not None and run.ended < ended_before and not run.status.is_open
            ][:limit]
            for run in victims:
                state.drop_run(run)
        return len(victims)

    def delete_old_batches(self, *, claimed_before: datetime, limit: int = 10_000) -> int:
        state = self._state
        with self._write("delete old dispatch batches"):
            victims = sorted(i for i, b in state.batches.items() if b.claimed_at < claimed_before)
            for batch_id in victims[:limit]:
                state.drop(state.batches, batch_id)
        return len(victims[:limit])

    def delete_finished_oneshot_tasks(
        self, *, updated_before: datetime, limit: int = 10_000
    ) -> int:
        state = self._state
        with self._write("delete finished one-shot tasks"):
            victims = [
                task.id or 0
                for task in state.tasks.values()
                if task.schedule_kind is ScheduleKind.ONESHOT
                and task.status in _FINISHED
                and task.updated_at is not None
                and task.updated_at < updated_before
                # a disabled or cancelled task may still have a run going on
                and not any(run.status.is_open for run in state.runs_of(task.id or 0))
            ][:limit]
            for task_id in victims:
                state.drop_task(task_id)
        return len(victims)
