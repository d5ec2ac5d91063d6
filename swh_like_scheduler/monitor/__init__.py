"""Monitor duties (DESIGN.md §4): run by one process at a time.

* the plain values it shares with the store and the listener (workers seen,
  locks, sweeps, expiries) live in :mod:`swh_like_scheduler.domain.records`
  and are re-exported here; this package's ``__init__`` imports nothing that
  imports the store until a name of :mod:`.duties` is asked for;
* :mod:`.duties` — :func:`monitor_tick` (one pass: the lock, then steal,
  silent workers, one-shot expiry, retention, re-publish) and
  :func:`monitor_loop` (repeat it every ``period``);
* :mod:`.report` — :class:`MonitorReport`, what one pass did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..domain.records import (
    MONITOR_LOCK,
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
from ..plumbing.lazy import lazy_names

if TYPE_CHECKING:
    from .duties import MonitorSettings, monitor_loop, monitor_tick
    from .report import MonitorReport

__all__ = [
    "MONITOR_LOCK",
    "Expiry",
    "LockState",
    "MonitorReport",
    "MonitorSettings",
    "WorkerChange",
    "WorkerChangeKind",
    "WorkerSighting",
    "WorkerState",
    "WorkerSweep",
    "default_holder",
    "monitor_loop",
    "monitor_tick",
    "worker_timeout",
]

__getattr__ = lazy_names(
    __name__,
    {
        "MonitorSettings": "duties",
        "monitor_loop": "duties",
        "monitor_tick": "duties",
        "MonitorReport": "report",
    },
)
