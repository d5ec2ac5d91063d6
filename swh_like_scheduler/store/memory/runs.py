"""Runs in memory: started, ended (the outcome applied to the task in the
same write), published, read back (:class:`~..role_runs.RunStore`; the SQL
store's :mod:`..sql_ends` and :mod:`..sql_runs`)."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ...domain.enums import check_aware
from ...domain.exceptions import InvalidInput, InvalidTransition, NotFound, StoreError
from ...domain.model import RunStatus, Task, TaskRun, TaskStatus, final_run_status, run_backend_id
from ..sql_ends import ANNOUNCE_WITHIN, _gave_up
from ..values import ApplyOutcome, RunEnd
from .claims import ClaimMethods


def _json(value: Any) -> Any:
    """``value`` as a database gives it back from a JSON column."""
    return None if value is None else json.loads(json.dumps(value))


class RunMethods(ClaimMethods):
    """Runs starting, ending, published and read."""

    def schedule_task_run(
        self, task_id: int, *, now: datetime, backend_id: str | None = None
    ) -> TaskRun:
        with self._write("schedule task run"):
            current = self._state.tasks.get(task_id)
            if current is None:
                raise NotFound(f"no task {task_id}")
            if current.status is not TaskStatus.WAITING:
                raise InvalidTransition(
                    f"task {task_id} is {current.status}; only a waiting task can be scheduled"
                )
            self._state.put_task(current.updated(status=TaskStatus.SCHEDULED, updated_at=now))
            slot = current.next_run
            run_id = backend_id or run_backend_id(task_id, slot, self._run_namespace())
            return self._new_run(task_id, run_id, slot, now, None)

    def start_task_run(
        self, backend_id: str, *, started: datetime, worker: str | None = None
    ) -> TaskRun | None:
        return self.start_task_runs([(backend_id, started, worker)]).get(backend_id)

    def start_task_runs(
        self, starts: Sequence[tuple[str, datetime, str | None]]
    ) -> dict[str, TaskRun]:
        first: dict[str, tuple[datetime, str | None]] = {}
        for backend_id, started, worker in starts:
            check_aware("started", started)
            first.setdefault(backend_id, (started, worker))
        found: dict[str, TaskRun] = {}
        state = self._state
        with self._write("start task runs"):
            for backend_id, (started, worker) in first.items():
                run = self._run(backend_id)
                if run is None:
                    continue
                if run.status is RunStatus.SCHEDULED:
                    # never started before it was dispatched
                    at = max(started, run.scheduled)
                    run = replace(run, status=RunStatus.STARTED, started=at, worker=worker)
                    state.put_run(run)
                found[backend_id] = run
        return found

    def end_task_run(
        self,
        backend_id: str,
        *,
        status: RunStatus,
        ended: datetime,
        result: Any = None,
        error: str | None = None,
        apply: ApplyOutcome | None = None,
    ) -> TaskRun | None:
        end = RunEnd(backend_id, status, ended, result, error)
        return self.end_task_runs([end], apply=apply)[0]

    def end_task_runs(
        self, ends: Sequence[RunEnd], *, apply: ApplyOutcome | None = None
    ) -> list[TaskRun | None]:
        statuses = [final_run_status(end.status) for end in ends]  # all checked first
        for end in ends:
            check_aware("ended", end.ended)
        results: list[TaskRun | None] = []
        state = self._state
        with self._write("end task runs"):
            woken: set[str] = set()
            for end, status in zip(ends, statuses, strict=True):
                run = self._run(end.backend_id)
                if run is not None and run.status is RunStatus.LOST:
                    raise StoreError(
                        "the memory store does not hold run losses yet (a late end of a lost run)"
                    )
                if run is not None and run.status.is_open and _gave_up(status, end):
                    raise StoreError(
                        "the memory store does not hold leases yet (a copy that gave its run up)"
                    )
                if run is not None and run.status.is_open:
                    floor = run.started or run.scheduled
                    run = replace(
                        run,
                        status=status,
                        ended=max(end.ended, floor),
                        result=_json(end.result),
                        error=end.error,
                        progress=1.0 if status.is_good else run.progress,
                    )
                    state.put_run(run)
                    if apply is not None:
                        woken.update(self._apply(run, apply))
                results.append(run)
            self._announce(woken)
        return results

    def _apply(self, run: TaskRun, apply: ApplyOutcome) -> list[str]:
        """The task of the ended ``run`` through ``apply``: the type to wake
        when it is ready again soon."""
        task = self._state.tasks.get(run.task_id)
        if task is None or run.ended is None:
            return []
        after: Task = apply(task, run).updated(updated_at=run.ended)
        self._state.put_task(after)
        if after.status is TaskStatus.WAITING and after.next_run <= run.ended + ANNOUNCE_WITHIN:
            return [after.type]
        return []

    def _run(self, backend_id: str) -> TaskRun | None:
        run_id = self._state.backend_ids.get(backend_id)
        return self._state.runs.get(run_id) if run_id is not None else None

    def mark_published(self, batches: Collection[int], *, at: datetime) -> None:
        if not batches:
            return
        state = self._state
        with self._write("mark dispatch batches published"):
            for batch_id in sorted(set(batches)):
                batch = state.batches.get(batch_id)
                if batch is not None and batch.published_at is None:
                    state.put(state.batches, batch_id, replace(batch, published_at=at))

    def get_task_run(self, backend_id: str) -> TaskRun | None:
        with self._state.lock:
            return self._run(backend_id)

    def get_task_runs(
        self,
        task_id: int,
        *,
        limit: int = 20,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[TaskRun]:
        if limit < 1:
            raise InvalidInput("limit", f"{limit} must be a positive number")
        wanted = None if statuses is None else {RunStatus(s) for s in statuses}
        with self._state.lock:
            runs = [r for r in self._state.runs_of(task_id) if wanted is None or r.status in wanted]
        runs.sort(key=lambda r: (r.scheduled, r.id or 0), reverse=True)
        return runs[:limit]

    def count_task_runs(self, task_id: int) -> int:
        with self._state.lock:
            return len(self._state.runs_of(task_id))
