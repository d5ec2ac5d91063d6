"""Records the store shares with the lease protocol, the listener and the
monitor duties: what the store answers to the lease and steal protocols
(DESIGN.md §4), workers seen, locks, sweeps and expiries.

Plain values in the model layer: no store, Celery or database import, so
the store imports them without importing a part above it
(:mod:`.lease` and :mod:`swh_like_scheduler.monitor` re-export some of them).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from .model import Task, TaskRun

# -- the lease and steal protocols ---------------------------------------------


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
    #: granted: the fencing token of this start (its task's count of granted
    #: starts, one more than the start before it) and the task's id
    fence: int | None = None
    task_id: int | None = None


@dataclass(frozen=True)
class PingReply:
    """The answer to a ping: ``proceed`` false means stop the run now."""

    proceed: bool
    reason: PingAnswer
    db_now: datetime


class Renewal(StrEnum):
    """What :meth:`renew_runs` found for one run a worker process holds."""

    OK = "ok"  # still open and still this copy's: renewed
    FINISHED = "finished"  # the run has ended (its end is recorded): let it go
    TAKEN = "taken"  # the run is open no more for this copy: another owner, or none


@dataclass(frozen=True)
class StealReport:
    """What one steal step did: ids of the tasks whose owner is now on
    notice (``steal_start_at`` set), and the runs declared ``lost``."""

    db_now: datetime
    warned: tuple[int, ...] = ()
    stolen: tuple[TaskRun, ...] = field(default=())


# -- workers, locks and monitor duties -------------------------------------------

#: The name of the monitor's lock in ``scheduler_lock``.
MONITOR_LOCK = "monitor"

#: Without a ``worker_timeout`` setting, a worker is silent after this many
#: missed heartbeats (``freq`` seconds each) ...
HEARTBEAT_MISSES = 3
#: ... but never before this long (so that a listener restart, during which
#: no heartbeat is recorded, does not declare every worker offline).
MIN_WORKER_TIMEOUT = timedelta(seconds=180)

#: History entry written on a run ended ``lost`` because its worker went away.
WORKER_OFFLINE = "worker_offline"
#: the real outcome of a run ended ``worker_offline`` arrived afterwards and replaced ``lost``
LATE_OUTCOME = "late_outcome"
#: a run ended ``cancelled`` because the late outcome of the run before it arrived
SUPERSEDED = "superseded"
#: the end of a run taken from its copy arrived after another copy had
#: started: the run is ``superseded``, its outcome kept but not applied
STALE_END = "stale_end"
#: the worker process running a run's body wrote its end itself (the
#: listener had not recorded it in time)
SELF_RECORDED = "self_recorded"
#: History entry written on the run that records a one-shot task's expiry.
EXPIRED = "expired"
#: How the ``error`` of that run begins.
EXPIRED_ERROR = "expired: "


def worker_timeout(freq: float | None, setting: timedelta | None) -> timedelta:
    """How long a worker whose heartbeat period is ``freq`` seconds may stay
    silent: ``setting`` when given, else the longer of ``HEARTBEAT_MISSES *
    freq`` and :data:`MIN_WORKER_TIMEOUT` (180 s when ``freq`` is unknown)."""
    if setting is not None:
        return setting
    if freq is None or freq <= 0:
        return MIN_WORKER_TIMEOUT
    return max(MIN_WORKER_TIMEOUT, timedelta(seconds=HEARTBEAT_MISSES * freq))


_holder: tuple[int, str] | None = None


def default_holder() -> str:
    """This process's identity as a lock holder: ``hostname:pid:random``
    (computed again in a forked child, whose pid differs)."""
    global _holder
    pid = os.getpid()
    if _holder is None or _holder[0] != pid:
        _holder = (pid, f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:12]}")
    return _holder[1]


@dataclass(frozen=True)
class WorkerSighting:
    """One worker event as the store records it: ``hostname`` (Celery's
    ``name@node``), ``at`` (the event's own timestamp, aware UTC),
    ``online`` (False for ``worker-offline``), the heartbeat period
    ``freq`` in seconds and the ``pid`` of the worker's main process when
    the event tells them; ``processed``, the tasks the worker has begun
    since it started (a heartbeat's count; not stored: the listener
    compares it with the task events it gets)."""

    hostname: str
    at: datetime
    online: bool
    freq: float | None = None
    pid: int | None = None
    processed: int | None = None


@dataclass(frozen=True)
class WorkerState:
    """A row of the ``worker`` table: the name's latest event
    (``last_heartbeat_at``, ``online``, ``freq``) and main process ``pid``
    (the one of its latest event), first seen at ``pid_since``; and
    ``other_pid``, another main process seen under the same name, last seen
    at ``other_seen_at``: a restart in progress (the old process, until it
    has been silent long enough) or a second live worker under one name.

    ``blind_since`` .. ``blind_until``: the worker took tasks without
    sending task events (started without ``-E``) over that window
    (``blind_until`` ``None`` while it lasts), running the Celery tasks
    ``blind_tasks`` (``None``: unknown, any): :mod:`..policy.blind`."""

    hostname: str
    last_heartbeat_at: datetime
    online: bool
    freq: float | None = None
    pid: int | None = None
    pid_since: datetime | None = None
    other_pid: int | None = None
    other_seen_at: datetime | None = None
    blind_since: datetime | None = None
    blind_until: datetime | None = None
    blind_tasks: tuple[str, ...] | None = None
    #: the database's clock minus the worker's, in seconds, as the listener
    #: measures it from the heartbeats (``None``: not measured)
    clock_offset: float | None = None


@dataclass(frozen=True)
class HostClock:
    """How far a daemon's host clock is from the database's: ``offset_seconds``
    is the database's instant minus the host's (positive: the host is
    behind), measured at ``measured_at`` (the database's clock) by the
    process ``holder`` (its role: runner, monitor, listener...)."""

    holder: str
    role: str
    offset_seconds: float
    measured_at: datetime


@dataclass(frozen=True)
class BlindWindow:
    """What the listener learnt of worker ``hostname``'s task events: it
    took tasks without sending them from ``since`` (``None``: a window
    already open is meant) until ``until`` (``None``: it still does),
    running the Celery tasks ``tasks`` (``None``: unknown, any)."""

    hostname: str
    since: datetime | None
    until: datetime | None = None
    tasks: tuple[str, ...] | None = None


class WorkerChangeKind(StrEnum):
    """What the main processes seen under one worker name show."""

    #: the main process ``other_pid`` stopped sending while ``pid`` sends
    #: under its name: it is gone, and its runs with it
    RESTART = "restart"
    #: ``pid`` and ``other_pid`` both send under the name: two live workers
    #: share it (neither is taken for a restart of the other)
    DUPLICATE = "duplicate"


@dataclass(frozen=True)
class WorkerChange:
    """A restart or a duplicate seen under the worker name ``hostname``:
    ``pid`` is the main process alive now, ``other_pid`` the one gone
    (restart) or the other live one (duplicate); ``at``, for a restart, the
    instant from which ``pid`` was seen (runs it took are its own)."""

    kind: WorkerChangeKind
    hostname: str
    at: datetime
    pid: int
    other_pid: int


@dataclass(frozen=True)
class LockState:
    """The answer to a lock request: whether ``holder`` (the asker) holds the
    lock now, who holds it (the asker, another process, or ``None`` when
    nobody does) and until when, on the database clock ``db_now``."""

    name: str
    held: bool
    holder: str | None
    expires_at: datetime | None
    db_now: datetime


@dataclass(frozen=True)
class WorkerSweep:
    """What the silent-worker duty did: workers it marked offline, and the
    runs it ended ``lost`` (of those workers and of workers already offline)."""

    marked_offline: tuple[str, ...] = ()
    lost: tuple[TaskRun, ...] = field(default=())


@dataclass(frozen=True)
class Expiry:
    """One one-shot task expired: the task as disabled, the run that records
    why, and the should-start-by instant it missed."""

    task: Task
    run: TaskRun
    should_start_by: datetime


#: History entry written on the run that records skipped firings.
SKIPPED = "skipped"


@dataclass(frozen=True)
class Skip:
    """Missed firings of a task dropped by its catch-up policy (``skip``):
    the task as it now waits (for the firing ``resume_at``; a one-shot task
    disabled), and the ``skipped`` run that records the stretch and why."""

    task: Task
    run: TaskRun
    #: the first firing dropped, and how many (``more``: at least that many)
    first: datetime
    count: int
    more: bool = False
    resume_at: datetime | None = None
