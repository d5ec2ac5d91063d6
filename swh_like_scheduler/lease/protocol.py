"""What the store answers to the lease protocol's calls (DESIGN.md §4).

Plain values with no Celery or database import, so the store, the worker
base class and the monitor can all share them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from ..model import Task, TaskRun


class Refusal(StrEnum):
    """Why :meth:`acquire_lease` granted or refused a run."""

    OK = "ok"
    UNKNOWN_RUN = "unknown_run"  # no run has this backend id
    FINISHED_RUN = "finished_run"  # the run already ended (a late duplicate)
    CANCELLED = "cancelled"  # the task was cancelled
    DISABLED = "disabled"  # the task was disabled
    ALREADY_RUNNING = "already_running"  # another copy owns the task
    BANNED_NODE = "banned_node"  # the node is in the task's dont_run_on_nodes
    BLACKOUT = "blackout"  # the database's now lies in a blackout window


class PingAnswer(StrEnum):
    """Why :meth:`ping_lease` told the owner to go on or to stop."""

    OK = "ok"
    STOLEN = "stolen"  # the task has another owner (or none): the run was taken away
    FINISHED = "finished"  # the run already ended
    CANCELLED = "cancelled"  # the task was cancelled or disabled
    BLACKOUT = "blackout"  # the database's now lies in a blackout window


#: History entries written on a run by the lease and steal protocols.
ASSIGNED = "assigned"
PINGED_LATE = "pinged_late"
STOLEN = "stolen"
#: a second copy of a run was refused at start (the body did not run)
REFUSED_COPY = "refused_copy"
#: the body asked Celery to retry: the run stays open, its owner let go
RETRYING = "retrying"
YIELDED = "yielded"
TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class LeaseGrant:
    """The answer to a lease request. ``db_now`` is the database's clock at
    the decision; ``task`` and ``run`` are as they are after it (``None`` when
    the run is unknown)."""

    granted: bool
    reason: Refusal
    db_now: datetime
    task: Task | None = None
    run: TaskRun | None = None


@dataclass(frozen=True)
class PingReply:
    """The answer to a ping: ``proceed`` false means stop the run now."""

    proceed: bool
    reason: PingAnswer
    db_now: datetime


@dataclass(frozen=True)
class StealReport:
    """What one steal step did: ids of the tasks whose owner is now on
    notice (``steal_start_at`` set), and the runs declared ``lost``."""

    db_now: datetime
    warned: tuple[int, ...] = ()
    stolen: tuple[TaskRun, ...] = field(default=())
