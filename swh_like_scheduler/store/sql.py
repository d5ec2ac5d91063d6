"""The SQLAlchemy Core implementation of :class:`SchedulerStore`.

One code path for PostgreSQL and SQLite; where they differ, the difference
is a capability flag (:class:`Capabilities`) rather than a second branch of
logic. The class is assembled from two halves: :mod:`.sql_tasks` (task types
and tasks) and :mod:`.sql_runs` (claims, runs, retention), over the plumbing
of :mod:`.sql_base`.
"""

from __future__ import annotations

from .sql_bulk import BulkMethods
from .sql_catchup import CatchUpMethods
from .sql_census import CensusMethods
from .sql_clock import ClockMethods
from .sql_console import ConsoleMethods
from .sql_edit import EditMethods
from .sql_grab import GrabMethods
from .sql_health import HealthMethods
from .sql_identity import IdentityMethods
from .sql_jobs import JobMethods
from .sql_lease import LeaseMethods
from .sql_load import LoadMethods
from .sql_monitor import MonitorMethods
from .sql_runs import RunMethods
from .sql_steal import StealMethods
from .sql_tasks import TaskMethods
from .sql_workers import WorkerMethods


class SQLAlchemyStore(
    EditMethods,
    TaskMethods,
    BulkMethods,
    RunMethods,
    MonitorMethods,
    StealMethods,
    LeaseMethods,
    HealthMethods,
    JobMethods,
    CatchUpMethods,
    LoadMethods,
    IdentityMethods,
    WorkerMethods,
    ClockMethods,
    GrabMethods,
    ConsoleMethods,
    CensusMethods,
):
    """Scheduler store on a SQLAlchemy engine (PostgreSQL or SQLite); also
    the console's sessions (:class:`~.role_console.ConsoleStore`)."""
