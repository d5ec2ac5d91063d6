"""Plain values shared by the store, the listener and the monitor duties: now
in :mod:`swh_like_scheduler.domain.records` (the model layer), re-exported here."""

from __future__ import annotations

from ..domain.records import (
    EXPIRED,
    HEARTBEAT_MISSES,
    LATE_OUTCOME,
    MIN_WORKER_TIMEOUT,
    MONITOR_LOCK,
    SUPERSEDED,
    WORKER_OFFLINE,
    Expiry,
    LockState,
    WorkerChange,
    WorkerChangeKind,
    WorkerSighting,
    WorkerState,
    WorkerSweep,
    default_holder,
    worker_timeout,
)

__all__ = [
    "EXPIRED",
    "HEARTBEAT_MISSES",
    "LATE_OUTCOME",
    "MIN_WORKER_TIMEOUT",
    "MONITOR_LOCK",
    "SUPERSEDED",
    "WORKER_OFFLINE",
    "Expiry",
    "LockState",
    "WorkerChange",
    "WorkerChangeKind",
    "WorkerSighting",
    "WorkerState",
    "WorkerSweep",
    "default_holder",
    "worker_timeout",
]
