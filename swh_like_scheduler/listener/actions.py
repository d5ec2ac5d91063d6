"""What handling the workers' events did: the :class:`Action` of each event,
its :class:`HandleResult`, and a batch's :class:`BatchSummary` (counted by
the listener's metrics, its poison guard and its consumer alike: this module
imports nothing of theirs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..domain.model import RunStatus, TaskRun


class Action(StrEnum):
    """What handling one event did."""

    STARTED = "started"  # the run was marked started
    ENDED = "ended"  # the run was ended and its outcome applied to its task
    DUPLICATE = "duplicate"  # the run was already there (or further): nothing changed
    KEPT_OPEN = "kept_open"  # a retry: the run stays open, nothing written
    UNKNOWN_RUN = "unknown_run"  # no run has this id: not ours, ignored
    IGNORED = "ignored"  # not a run event, or nothing to record
    WORKER = "worker"  # a worker event (heartbeat, online, offline) recorded (batches only)
    #: the end of a run taken from its copy, after another copy started: kept
    #: on the run (``superseded``), not applied to the task
    SUPERSEDED = "superseded"
    #: a visit's status applied to its origin's statistics (batches only)
    VISIT = "visit"


@dataclass(frozen=True)
class HandleResult:
    """The effect of one event: ``action``, the run it named (``None`` when
    unknown or not looked up) and, for an end, the final status written."""

    action: Action
    backend_id: str | None = None
    run: TaskRun | None = None
    status: RunStatus | None = None


@dataclass
class BatchSummary:
    """How many events of a batch led to each :class:`Action`."""

    counts: dict[Action, int] = field(default_factory=dict)

    def add(self, result: HandleResult) -> None:
        self.counts[result.action] = self.counts.get(result.action, 0) + 1

    def merge(self, other: BatchSummary) -> None:
        for action, count in other.counts.items():
            self.counts[action] = self.counts.get(action, 0) + count

    def __getitem__(self, action: Action) -> int:
        return self.counts.get(action, 0)

    @property
    def total(self) -> int:
        return sum(self.counts.values())
