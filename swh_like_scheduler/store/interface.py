"""The one store interface that every daemon and face of the scheduler uses,
made of role protocols (each in its own module): :class:`TaskStore`,
:class:`BulkStore`, :class:`RunStore`, :class:`JobStore`,
:class:`LeaseStore`, :class:`MonitorStore`, :class:`IdentityStore`,
:class:`OriginStore` (the origin-visit scheduler's listers and origins),
:class:`CensusStore` (the condition ledger and the stored census).

Implementations: :class:`~swh_like_scheduler.store.sql.SQLAlchemyStore`
(PostgreSQL and SQLite), :class:`~swh_like_scheduler.api.client.RemoteStore`
(over the HTTP API) and :class:`~swh_like_scheduler.store.memory.MemoryStore`
(held in one process's memory, for simulations; it holds the task, claim,
run and runner-pass methods so far). The same contract test suite runs
against each.
All datetimes given to or returned by a store are timezone-aware UTC.
Errors are :mod:`swh_like_scheduler.domain.exceptions`, never driver exceptions.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from .role_bulk import BulkStore
from .role_census import CensusStore
from .role_identity import IdentityStore
from .role_jobs import JobStore
from .role_lease import LeaseStore
from .role_monitor import MonitorStore
from .role_origins import OriginStore
from .role_runs import RunStore
from .role_tasks import TaskStore
from .values import (
    ALL_TASKS,
    READY_CHANNEL,
    ApplyOutcome,
    BulkAction,
    BulkFilter,
    BulkReport,
    Capabilities,
    ImportSummary,
    LongRuns,
    RunEnd,
    ScheduleHealth,
    TaskFilter,
    WaitingEntry,
)

__all__ = [
    "ALL_TASKS",
    "READY_CHANNEL",
    "ApplyOutcome",
    "BulkAction",
    "BulkFilter",
    "BulkReport",
    "BulkStore",
    "Capabilities",
    "CensusStore",
    "IdentityStore",
    "ImportSummary",
    "JobStore",
    "LeaseStore",
    "LongRuns",
    "MonitorStore",
    "OriginStore",
    "RunEnd",
    "RunStore",
    "ScheduleHealth",
    "SchedulerStore",
    "TaskFilter",
    "TaskStore",
    "WaitingEntry",
]


@runtime_checkable
class SchedulerStore(
    TaskStore,
    BulkStore,
    RunStore,
    JobStore,
    LeaseStore,
    MonitorStore,
    IdentityStore,
    OriginStore,
    CensusStore,
    Protocol,
):
    """Persistence of task types, tasks and their runs: every role."""

    @property
    def capabilities(self) -> Capabilities:
        """The engine's capability flags."""
        ...

    def close(self) -> None:
        """Release connections this store opened itself (not a caller's engine)."""
        ...

    def transaction(self) -> AbstractContextManager[SchedulerStore]:
        """A view of the store whose calls share one transaction, committed
        when the ``with`` block ends and rolled back if it raises (e.g. the
        listener records a batch of run events with one commit)."""
        ...
