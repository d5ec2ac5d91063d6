"""Which state a task's run is in, in words, and why an action changed nothing.

A task whose run was dispatched is ``scheduled`` until the run's end is
applied to it; the task row alone cannot say whether the run waits in its
queue, runs on a worker, or ended without its end reaching the task. The
run row (and its worker's row) can: :func:`run_state` reads them.

:func:`why_unchanged` says why ``respawn``, ``enable``, ``disable`` or
``cancel`` left a task as it was, and what to do instead. The command line,
the HTTP API and the console say the same.

Pure: the caller reads the task's latest run (and its worker) and gives ``now``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from ..domain.model import Task, TaskRun, TaskStatus
from ..domain.records import ASSIGNED, WorkerState
from .times import fmt_duration, fmt_instant


class RunPhase(StrEnum):
    """Where a task's latest run is."""

    QUEUED = "queued"  # dispatched, not started: its message waits for a worker
    #: dispatched, never seen to start, and a worker that sends no task
    #: events may have taken it: whether it runs, ran or waits is unknown
    UNKNOWN = "unknown"
    RUNNING = "running"  # started by a worker, not ended
    END_NOT_APPLIED = "end_not_applied"  # ended, but the task still says scheduled
    NO_RUN = "no_run"  # the task says scheduled and has no run at all
    ENDED = "ended"  # ended, and the task knows


@dataclass(frozen=True)
class RunState:
    """The latest run's phase, the run and a sentence for a person."""

    phase: RunPhase
    run: TaskRun | None
    detail: str

    @property
    def is_open(self) -> bool:
        return self.phase in (RunPhase.QUEUED, RunPhase.RUNNING, RunPhase.UNKNOWN)

    def to_dict(self) -> dict[str, Any]:
        run = self.run
        return {
            "phase": str(self.phase),
            "run_id": run.id if run is not None else None,
            "backend_id": run.backend_id if run is not None else None,
            "status": str(run.status) if run is not None else None,
            "scheduled": run.scheduled.isoformat() if run is not None else None,
            "started": run.started.isoformat() if run is not None and run.started else None,
            "worker": run.worker if run is not None else None,
            "detail": self.detail,
        }


def _when(instant: datetime, now: datetime) -> str:
    delta = now - instant
    if delta.total_seconds() >= 1:
        return f"{fmt_instant(instant)} ({fmt_duration(delta)} ago)"
    return fmt_instant(instant)


def assigned_pid(run: TaskRun) -> int | None:
    """The worker main process the start guard noted for ``run``, if any."""
    for entry in reversed(run.history):
        if entry.get("event") == ASSIGNED:
            pid = entry.get("pid")
            return pid if isinstance(pid, int) else None
    return None


def _worker_clause(run: TaskRun, worker: WorkerState | None, now: datetime) -> str:
    if worker is None or worker.hostname != run.worker:
        return ""
    heard = _when(worker.last_heartbeat_at, now)
    if worker.online:
        return f"; its worker was last heard from at {heard}"
    return (
        f"; its worker is offline since {heard}: the monitor ends the run `lost` once the "
        "worker has been offline for its grace, and the task runs again"
    )


def run_state(
    task: Task,
    run: TaskRun | None,
    now: datetime,
    *,
    worker: WorkerState | None = None,
    queue: str | None = None,
    holders: Sequence[WorkerState] = (),
) -> RunState | None:
    """The state of ``run``, the latest run of ``task`` (``None``: it has
    none), with what ``worker`` (the run's worker's row, if read) says of
    it; ``queue`` names the queue its message waits in; ``holders``, the
    live workers sending no task events that may have taken it
    (:func:`.blind.holders`): its state is then unknown. ``None`` when
    there is nothing to say (no run, and the task does not wait for one)."""
    if run is None:
        if task.status is not TaskStatus.SCHEDULED:
            return None
        return RunState(
            RunPhase.NO_RUN,
            None,
            "the task is marked scheduled (dispatched) but has no run: cancel it, then respawn it",
        )
    name = f"run {run.id}" if run.id is not None else f"run {run.backend_id}"
    if run.status.is_open and run.started is None and holders:
        names = ", ".join(w.hostname for w in holders)
        one = len(holders) == 1
        some, sends, that = (
            ("worker", "sends", "that worker is")
            if one
            else (
                "workers",
                "send",
                "they are",
            )
        )
        return RunState(
            RunPhase.UNKNOWN,
            run,
            f"{name} was dispatched at {_when(run.scheduled, now)} and no task-started event "
            f"arrived: its message may have left the queue for {some} {names}, which "
            f"{sends} no task events (started without -E); whether it runs, ran or waits is "
            f"unknown, and it is not published again while {that} alive",
        )
    if run.status.is_open and run.started is None:
        where = f" in queue {queue}" if queue else ""
        return RunState(
            RunPhase.QUEUED,
            run,
            f"{name} was dispatched at {_when(run.scheduled, now)} and has not started yet: "
            f"its message waits{where} for a worker",
        )
    if run.status.is_open:
        assert run.started is not None
        pid = assigned_pid(run)
        by = f" by worker {run.worker}" if run.worker else ""
        process = f" (main process {pid})" if pid is not None else ""
        return RunState(
            RunPhase.RUNNING,
            run,
            f"{name} started at {_when(run.started, now)}{by}{process} and has not "
            f"ended yet{_worker_clause(run, worker, now)}",
        )
    ended = _when(run.ended, now) if run.ended is not None else "an unknown time"
    if task.status is TaskStatus.SCHEDULED:
        return RunState(
            RunPhase.END_NOT_APPLIED,
            run,
            f"{name} ended {run.status} at {ended}, but the task still says scheduled: its "
            "end was not applied to the task; cancel it, then respawn it",
        )
    return RunState(RunPhase.ENDED, run, f"{name} ended {run.status} at {ended}")


def why_unchanged(
    action: str,
    task: Task,
    run: TaskRun | None,
    now: datetime,
    *,
    worker: WorkerState | None = None,
) -> str:
    """Why ``action`` (``respawn``, ``enable``, ``disable``, ``cancel``,
    ``delete``; the console's ``run-now`` is a respawn) left ``task`` as it
    is, and what to do instead, from the task and its latest run:
    ``unchanged: …``."""
    verb = "respawn" if action == "run-now" else action
    ref = f"`swh scheduler task {{}} {task.id}`"
    status = task.status
    if verb in ("respawn", "delete") and status is TaskStatus.SCHEDULED:
        state = run_state(task, run, now, worker=worker)
        if state is not None and state.is_open:
            return (
                f"unchanged: the task has an open run: {state.detail}; cancel it first "
                f"({ref.format('cancel')}), or wait for it to end"
            )
        detail = state.detail if state is not None else "it is marked scheduled"
        return f"unchanged: {detail}"
    if verb == "enable":
        if status is TaskStatus.WAITING:
            return (
                f"unchanged: the task is not disabled (status waiting): it runs from "
                f"{fmt_instant(task.next_run)}"
            )
        if status is TaskStatus.SCHEDULED:
            state = run_state(task, run, now, worker=worker)
            detail = f": {state.detail}" if state is not None else ""
            return f"unchanged: the task is not disabled, it is dispatched{detail}"
        if status is TaskStatus.COMPLETED:
            return (
                "unchanged: a completed one-shot task is not disabled; "
                f"{ref.format('respawn')} runs it again"
            )
        if status is TaskStatus.CANCELLED:
            return (
                f"unchanged: the task is cancelled, not disabled; {ref.format('respawn')} "
                "makes it runnable again"
            )
    if verb == "disable":
        if status is TaskStatus.DISABLED:
            return f"unchanged: the task is already disabled ({ref.format('enable')} undoes it)"
        return f"unchanged: the task is {status}: nothing is scheduled to disable"
    if verb == "cancel":
        if status is TaskStatus.CANCELLED:
            return "unchanged: the task is already cancelled"
        return f"unchanged: the task is {status}: nothing is left to cancel"
    return f"unchanged (status {status})"


__all__ = [
    "RunPhase",
    "RunState",
    "assigned_pid",
    "run_state",
    "why_unchanged",
]
