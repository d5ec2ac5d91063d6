"""A run's outcome applied to its task: :func:`outcome_applier` gives the
``apply`` callback of :meth:`SchedulerStore.end_task_runs` (the policy's
next state of the task), over a :class:`TaskTypeCache` of the task types.

Every part that records how a run ended uses it alike: the listener (the
workers' events), the worker's start guard (a run that ends before its
events are heard), the monitor (runs lost with their worker), the runner's
loop and the HTTP API's remote store (the server applies its own policy)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..domain.model import Task, TaskRun, TaskStatus, TaskType
from ..policy import Outcome, RandomSource, already_applied, apply_outcome
from ..store import SchedulerStore

logger = logging.getLogger(__name__)


class TaskTypeCache:
    """Task types by name, read from the store on first use and again after
    ``ttl`` seconds (so a changed backoff factor or retry policy is seen).

    Safe to share between threads. ``clock`` is a monotonic clock (seconds).
    """

    def __init__(
        self,
        store: SchedulerStore,
        *,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._types: dict[str, tuple[float, TaskType | None]] = {}

    def get(self, name: str) -> TaskType | None:
        """The task type ``name`` (``None`` if it does not exist)."""
        now = self._clock()
        with self._lock:
            hit = self._types.get(name)
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        found = self._store.get_task_type(name)
        with self._lock:
            self._types[name] = (now, found)
        return found

    def prime(self) -> None:
        """Load every task type at once (saves one read per type later)."""
        now = self._clock()
        loaded = {t.type: (now, t) for t in self._store.get_task_types()}
        with self._lock:
            self._types.update(loaded)


#: what a remote store sends for :func:`outcome_applier`'s function: the
#: server applies its own (a function does not travel)
APPLY_WIRE_NAME = "outcome-policy"


def outcome_applier(
    task_types: TaskTypeCache, rng: RandomSource
) -> Callable[[Task, TaskRun], Task]:
    """The ``apply`` callback of :meth:`SchedulerStore.end_task_run`: the task
    after its run ended, by :func:`policy.apply_outcome`.

    The policy sends a live task back to ``waiting`` (or ``completed`` for a
    good one-shot run) and keeps ``cancelled``/``disabled``; a ``scheduled``
    status is never left behind, so the runner can dispatch the task again.
    """

    def apply(task: Task, run: TaskRun) -> Task:
        assert run.ended is not None
        task_type = task_types.get(task.type)
        if task_type is None:  # cannot happen with the store's foreign keys
            logger.error("run %s: task type %s is unknown", run.backend_id, task.type)
            if task.status is TaskStatus.SCHEDULED:
                return task.updated(status=TaskStatus.WAITING)
            return task
        started = run.started if run.started is not None and run.started <= run.ended else None
        outcome = Outcome(
            status=run.status,
            ended=run.ended,
            started=started,
            slot=run.slot,
            backend_id=run.backend_id,
        )
        if already_applied(task, outcome):
            # The run row guarantees one application per run and runs of one
            # task never overlap, so this is clock skew between workers: apply
            # anyway rather than leave the task scheduled without a run.
            logger.warning(
                "run %s of task %s ended at %s, before the task's last end %s "
                "(worker clock skew?); applied anyway",
                run.backend_id,
                task.id,
                run.ended.isoformat(),
                task.last_end_at.isoformat() if task.last_end_at else "-",
            )
        after = apply_outcome(task, task_type, outcome, rng=rng)
        if after.status is TaskStatus.SCHEDULED:
            after = after.updated(status=TaskStatus.WAITING)
        return after

    apply.wire_name = APPLY_WIRE_NAME  # type: ignore[attr-defined]
    return apply
