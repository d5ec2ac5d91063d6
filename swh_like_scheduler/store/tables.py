"""The schema, defined once with SQLAlchemy Core for PostgreSQL and SQLite.

Alembic migrations in ``sql/versions`` must produce exactly these tables; a
test compares the two with Alembic's autogenerate.
"""

from __future__ import annotations

import sqlalchemy as sa

from ..domain.model import CatchUp, Priority, RunStatus, ScheduleKind, TaskStatus

# (the names other modules import from here, re-exported)
from .tables_base import NAMING_CONVENTION as NAMING_CONVENTION
from .tables_base import UTCDateTime as UTCDateTime
from .tables_base import _bigint_pk, _bytewise, _enum_values, _in, _json, metadata
from .tables_visits import listed_origin as listed_origin
from .tables_visits import lister as lister
from .tables_visits import origin_metrics as origin_metrics
from .tables_visits import origin_visit_stats as origin_visit_stats
from .tables_visits import visit_queue_position as visit_queue_position

task_type = sa.Table(
    "task_type",
    metadata,
    sa.Column("type", sa.Text, primary_key=True),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("backend_name", sa.Text, nullable=False),
    sa.Column("queue", sa.Text),
    sa.Column("default_interval", sa.Interval),
    sa.Column("min_interval", sa.Interval),
    sa.Column("max_interval", sa.Interval),
    sa.Column("backoff_factor", sa.Float),
    sa.Column("max_queue_length", sa.Integer),
    sa.Column("num_retries", sa.Integer),
    sa.Column("retry_delay", sa.Interval, nullable=False),
    sa.Column("retry_growth", sa.Float, nullable=False),
    sa.Column("retry_cap", sa.Interval, nullable=False),
    sa.Column("retry_jitter", sa.Interval, nullable=False),
    sa.Column("max_expected_duration", sa.Interval),
    sa.Column("max_allowed_duration", sa.Interval),
    sa.Column("uses_lease", sa.Boolean, nullable=False, server_default=sa.false()),
    # set while an operator has paused the type (sql/versions/0008_task_type_pause.py)
    sa.Column("paused_at", UTCDateTime),
    sa.Column("catch_up", sa.Text, nullable=False, server_default=CatchUp.LATEST.value),
    # NULL (types older than the setting): DEFAULT_CATCH_UP_GRACE
    sa.Column("catch_up_grace", sa.Interval),
    # the monitor's measurement of the type's adaptive tasks
    # (sql/versions/0010_task_type_load.py)
    sa.Column("load_demand", sa.Float),
    sa.Column("load_delivered", sa.Float),
    sa.Column("load_backlog", sa.Integer),
    sa.Column("load_measured_at", UTCDateTime),
    sa.CheckConstraint("max_queue_length >= 0", name="max_queue_length"),
    sa.CheckConstraint("num_retries >= 0", name="num_retries"),
    sa.CheckConstraint("backoff_factor > 1", name="backoff_factor"),
    sa.CheckConstraint(_in("catch_up", _enum_values(CatchUp)), name="catch_up"),
)

TASK_LIVE_STATUSES = [TaskStatus.WAITING.value, TaskStatus.SCHEDULED.value]
#: ``status IN ('waiting', 'scheduled')`` with the values written in the SQL,
#: as in the predicate of ``ux_task_identical``: a query with it stays able
#: to use that partial index under a generic plan (a prepared statement run
#: often), where bound values could not prove the predicate
LIVE_STATUS = sa.text("task.status IN ('waiting', 'scheduled')")
#: ``status IN ('scheduled', 'started')`` written out likewise: the predicate
#: of ``ix_task_run_open``, so that a read of the open runs uses that index
#: under a generic plan instead of scanning every run the table keeps
OPEN_RUN = sa.text("task_run.status IN ('scheduled', 'started')")

#: tasks with a catch-up setting of their own (rare): a runner pass looks
#: for their missed firings whatever their type's policy
_OWN_CATCH_UP = "status = 'waiting' AND (catch_up IS NOT NULL OR catch_up_grace IS NOT NULL)"

_ONESHOT_FINISHED = "schedule_kind = 'oneshot' AND status IN ('completed', 'disabled', 'cancelled')"


def _partial_index(name: str, *columns: str, where: str, unique: bool = False) -> sa.Index:
    """An index over the rows matching ``where``, on PostgreSQL and SQLite alike."""
    predicate = sa.text(where)
    return sa.Index(
        name, *columns, unique=unique, postgresql_where=predicate, sqlite_where=predicate
    )


task = sa.Table(
    "task",
    metadata,
    sa.Column("id", _bigint_pk(), primary_key=True, autoincrement=True),
    sa.Column(
        "type",
        sa.Text,
        sa.ForeignKey("task_type.type", onupdate="CASCADE"),
        nullable=False,
    ),
    sa.Column("arguments", _json(), nullable=False),
    sa.Column("arguments_hash", _bytewise(sa.String(64)), nullable=False),
    sa.Column("key", sa.Text),
    sa.Column("schedule_kind", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("priority", sa.Text, nullable=False),
    sa.Column("next_run", UTCDateTime, nullable=False),
    sa.Column("deadline", UTCDateTime, nullable=False),
    sa.Column("current_interval", sa.Interval),
    sa.Column("period", sa.Interval),
    sa.Column("cooldown", sa.Interval),
    # the cooldown is the default one, which follows the run time
    # (sql/versions/0018_default_cooldown.py), not one a client gave
    sa.Column("cooldown_is_default", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("cron", sa.Text),
    sa.Column("cron_max_duration", sa.Interval),
    sa.Column("max_delay", sa.Interval),
    sa.Column("catch_up", sa.Text),
    sa.Column("catch_up_grace", sa.Interval),
    sa.Column("skipped_until", UTCDateTime),
    sa.Column("tz", sa.Text, nullable=False, server_default="UTC"),
    sa.Column("blackout_periods", _json(), nullable=False),
    sa.Column("dont_run_on_nodes", _json(), nullable=False),
    sa.Column("max_expected_duration", sa.Interval),
    sa.Column("max_allowed_duration", sa.Interval),
    sa.Column("expected_duration", sa.Interval),
    sa.Column("retries_left", sa.Integer, nullable=False, server_default="0"),
    sa.Column("failure_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_good_start_at", UTCDateTime),
    sa.Column("last_good_end_at", UTCDateTime),
    sa.Column("last_start_at", UTCDateTime),
    sa.Column("last_end_at", UTCDateTime),
    sa.Column("average_good_duration", sa.Interval),
    sa.Column("owner_node", sa.Text),
    sa.Column("owner_name", sa.Text),
    sa.Column("owner_tag", sa.Text),
    sa.Column("owner_started_at", UTCDateTime),
    sa.Column("owner_last_ping_at", UTCDateTime),
    sa.Column("steal_start_at", UTCDateTime),
    # how many starts the guard granted (sql/versions/0011_fencing.py): the
    # fencing token of the latest; only ever raised by the guard's write
    sa.Column("fence", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.CheckConstraint(_in("schedule_kind", _enum_values(ScheduleKind)), name="schedule_kind"),
    sa.CheckConstraint(_in("status", _enum_values(TaskStatus)), name="status"),
    sa.CheckConstraint(_in("priority", _enum_values(Priority)), name="priority"),
    sa.CheckConstraint(_in("catch_up", _enum_values(CatchUp)), name="catch_up"),
    sa.CheckConstraint("retries_left >= 0", name="retries_left"),
    sa.CheckConstraint("failure_count >= 0", name="failure_count"),
    # waiting tasks of a type and class by can_start_by: which are ready now
    # (one index range, however many tasks are not due yet)
    _partial_index("ix_task_ready", "type", "priority", "next_run", where="status = 'waiting'"),
    # waiting tasks of a type and class by should_start_by, then id: the
    # dispatch order, read in order (a claim never sorts the ready tasks)
    _partial_index(
        "ix_task_dispatch_order", "type", "priority", "deadline", "id", where="status = 'waiting'"
    ),
    # at most one live task per identical definition (swh-scheduler's dedup);
    # tasks with a client key are identified by their key instead
    # (the digest leads: it is what lookups are selective on)
    _partial_index(
        "ux_task_identical",
        "arguments_hash",
        "type",
        "schedule_kind",
        "priority",
        where="key IS NULL AND status IN ('waiting', 'scheduled')",
        unique=True,
    ),
    # a client key names one task (tasks without a key have no entry)
    _partial_index("uq_task_key", "key", where="key IS NOT NULL", unique=True),
    # leases the steal step watches (owned tasks only)
    # leases (owners that ping), for the steal step (0005: not every owned task)
    _partial_index("ix_task_catch_up", "type", "next_run", where=_OWN_CATCH_UP),
    _partial_index("ix_task_owned", "owner_last_ping_at", where="owner_last_ping_at IS NOT NULL"),
    # one-shot tasks the expiry and the retention duties look at
    _partial_index(
        "ix_task_oneshot_waiting",
        "next_run",
        where="schedule_kind = 'oneshot' AND status = 'waiting'",
    ),
    _partial_index("ix_task_oneshot_finished", "updated_at", where=_ONESHOT_FINISHED),
    # the tasks changed since an instant: what the census assesses again
    # (sql/versions/0016_condition_ledger.py)
    sa.Index("ix_task_updated_at", "updated_at"),
    # dispatched tasks of a type by should_start_by: the oldest run waiting
    # in the broker, found without reading the queue (0017_queued_runs.py)
    _partial_index("ix_task_in_flight", "type", "deadline", where="status = 'scheduled'"),
)

task_run = sa.Table(
    "task_run",
    metadata,
    sa.Column("id", _bigint_pk(), primary_key=True, autoincrement=True),
    sa.Column(
        "task_id",
        sa.BigInteger,
        sa.ForeignKey("task.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("backend_id", _bytewise(sa.Text()), nullable=False, unique=True),
    sa.Column("slot", UTCDateTime, nullable=False),
    sa.Column("scheduled", UTCDateTime, nullable=False),
    sa.Column("started", UTCDateTime),
    sa.Column("ended", UTCDateTime),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("worker", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("progress", sa.Float),
    sa.Column("result", _json()),
    sa.Column("history", _json(), nullable=False),
    # the dispatch batch whose message publication this run waits on
    # (sql/versions/0006_dispatch_batches.py); NULL: created before batches
    # existed, or outside a claim (its message counts as published when the
    # run was scheduled). No foreign key: retention deletes old batches, and
    # a missing batch means the same as NULL.
    sa.Column("batch_id", sa.BigInteger),
    # the fencing token of the start that took this run (its task's ``fence``
    # then); NULL while no start guard took it (0011_fencing.py)
    sa.Column("fence", sa.BigInteger),
    sa.UniqueConstraint("task_id", "slot"),
    sa.CheckConstraint(_in("status", _enum_values(RunStatus)), name="status"),
    sa.CheckConstraint("progress >= 0 AND progress <= 1", name="progress"),
    # ended runs by end time, for retention (open runs have no entry)
    _partial_index("ix_task_run_ended", "ended", where="ended IS NOT NULL"),
    _partial_index("ix_task_run_open", "scheduled", where="status IN ('scheduled', 'started')"),
    # the runs not started, by task (0017_queued_runs.py)
    _partial_index("ix_task_run_queued", "task_id", where="status = 'scheduled'"),
)

#: One claim's (or one re-publication's) runs, and whether their messages
#: reached the broker: ``published_at`` is set after the publication, so a
#: batch claimed long ago and never published belongs to a runner that died
#: (or failed) in between, and its runs are published again at once, while
#: runs whose messages did go out wait for ``--republish-after``
#: (sql/versions/0006_dispatch_batches.py).
dispatch_batch = sa.Table(
    "dispatch_batch",
    metadata,
    sa.Column("id", _bigint_pk(), primary_key=True, autoincrement=True),
    sa.Column("claimed_at", UTCDateTime, nullable=False),
    sa.Column("published_at", UTCDateTime),
    _partial_index("ix_dispatch_batch_claimed_at", "claimed_at", where="published_at IS NULL"),
)

# -- monitor (sql/versions/0002_monitor.py) ------------------------------------

#: Celery workers seen by the listener (worker-heartbeat/-online/-offline
#: events): the last sign of life on the worker's own clock, and whether its
#: latest event said it was online; ``pid``, its main process
#: (sql/versions/0005_start_guard.py).
worker = sa.Table(
    "worker",
    metadata,
    sa.Column("hostname", sa.Text, primary_key=True),
    sa.Column("last_heartbeat_at", UTCDateTime, nullable=False),
    sa.Column("online", sa.Boolean, nullable=False),
    sa.Column("freq", sa.Float),
    sa.Column("pid", sa.Integer),
    # when ``pid`` was first seen, and the other main process seen under the
    # same name (a restart in progress, or a second live worker: a
    # duplicate name), last seen when (sql/versions/0012_identity.py)
    sa.Column("pid_since", UTCDateTime),
    sa.Column("other_pid", sa.Integer),
    sa.Column("other_seen_at", UTCDateTime),
    # taking tasks without sending task events from ``blind_since`` until
    # ``blind_until`` (NULL while it lasts), running these Celery task names
    # (JSON list; NULL: unknown) (sql/versions/0019_worker_task_events.py)
    sa.Column("blind_since", UTCDateTime),
    sa.Column("blind_until", UTCDateTime),
    sa.Column("blind_tasks", _json()),
    # the database's clock minus the worker's, seconds, as the listener
    # measures it from the heartbeats (sql/versions/0020_host_clocks.py)
    sa.Column("clock_offset", sa.Float),
)

#: How far each runner's, monitor's and listener's host clock is from the
#: database's (the database's instant minus the host's, seconds), measured
#: at ``measured_at`` on the database's clock (sql/versions/0020_host_clocks.py).
host_clock = sa.Table(
    "host_clock",
    metadata,
    sa.Column("holder", sa.Text, primary_key=True),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("offset_seconds", sa.Float, nullable=False),
    sa.Column("measured_at", UTCDateTime, nullable=False),
)

#: Named locks with an expiry on the database clock (the monitor's: one
#: process at a time does the monitor duties).
scheduler_lock = sa.Table(
    "scheduler_lock",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
)

#: The monitor's steal settings, published by the monitor holding its lock
#: at each pass (one row, ``name = 'monitor'``): the worker processes read
#: them to fence themselves before the monitor may take their runs
#: (:mod:`swh_like_scheduler.domain.fencing`; sql/versions/0021_lease_terms.py).
lease_terms = sa.Table(
    "lease_terms",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("ping_timeout", sa.Float, nullable=False),  # seconds
    sa.Column("grace", sa.Float, nullable=False),  # seconds
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("published_at", UTCDateTime, nullable=False),
)

#: When the latest runner pass that had room for every ready task of a type
#: and priority class *began*: it claimed them all with capacity to spare
#: and left none behind (no row held by another transaction). A one-shot
#: task expires only if such a pass began after its deadline (plus grace),
#: its creation, its last change and its can_start_by, and still could not
#: take it (its own constraints: banned nodes, a blackout window); a task
#: late because no runner ran, or because its queue was full, is dispatched
#: when room comes back (sql/versions/0007_dispatch_room.py).
dispatch_room = sa.Table(
    "dispatch_room",
    metadata,
    sa.Column("task_type", sa.Text, primary_key=True),
    sa.Column("priority", sa.Text, primary_key=True),
    sa.Column("at", UTCDateTime, nullable=False),
)

#: The installation's identity: one row (``one`` = 1), its random ``id``
#: written at ``db init`` or the first use of the database. The listener's
#: default event queue and the namespace of new runs' Celery task ids derive
#: from it (sql/versions/0012_identity.py).
installation = sa.Table(
    "installation",
    metadata,
    sa.Column("one", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("id", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.CheckConstraint("one = 1", name="one_row"),
)

# -- origin visits (sql/versions/0013_origin_visits.py) ------------------------


#: The console's sessions, kept server-side so that one can end: ``id`` is
#: derived from the cookie's nonce (never the cookie itself), ``token`` the
#: fingerprint of the API token it was opened with. A cookie is honoured
#: only while its row is not ``ended_at`` and was ``seen_at`` within the
#: idle time (console/session.py).
console_session = sa.Table(
    "console_session",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("token", sa.Text, nullable=False),
    sa.Column("opened_at", UTCDateTime, nullable=False),
    sa.Column("seen_at", UTCDateTime, nullable=False),
    sa.Column("ended_at", UTCDateTime),
    sa.Index(None, "token"),
    sa.Index(None, "opened_at"),
)

#: One-time console login links: ``id`` is derived from the link's code,
#: ``token`` the fingerprint of the token whose access the session gets;
#: a link opens one session, before ``expires_at``.
console_link = sa.Table(
    "console_link",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("token", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
    sa.Column("used_at", UTCDateTime),
    sa.Index(None, "expires_at"),
)

# -- the condition ledger (sql/versions/0016_condition_ledger.py) ---------------

#: Every watched task's condition as the census last assessed it, so that
#: counts and the problem list are read from an index rather than by
#: evaluating every task. ``rank`` 0 is ERROR, 1 WARNING, 2 OK;
#: ``finish_by`` orders the problems (most late first); ``holds_until`` is
#: the instant the level may change with the clock alone (NULL: only when
#: the task changes); the ``seen_*`` columns are the task's own values when
#: it was assessed: a row that differs from its task is assessed again.
task_condition = sa.Table(
    "task_condition",
    metadata,
    # no foreign key: its check would share-lock the task row, and a claim
    # (``FOR UPDATE SKIP LOCKED``) would skip a task the census is writing;
    # a deletion deletes the row, and the census's sweep any it missed
    sa.Column("task_id", sa.BigInteger, primary_key=True),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("rank", sa.SmallInteger, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("finish_by", UTCDateTime),
    sa.Column("holds_until", UTCDateTime),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("priority", sa.Text, nullable=False),
    # lower-case key and arguments of a task that is not OK (free-text filter)
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("seen_updated_at", UTCDateTime, nullable=False),
    sa.Column("seen_started_at", UTCDateTime),
    sa.Column("seen_status", sa.Text, nullable=False),
    # the fingerprint of the type's settings it was assessed with
    sa.Column("type_seen", sa.Text, nullable=False),
    sa.Column("assessed_at", UTCDateTime, nullable=False),
    sa.Index(None, "holds_until"),
    sa.Index(None, "rank", "finish_by", "task_id"),
    # counted without reading the rows (an index-only scan)
    sa.Index(None, "type", "rank", "seen_status"),
    # the rows of tasks with a run under way: their start is compared at each step
    _partial_index("ix_task_condition_scheduled", "task_id", where="seen_status = 'scheduled'"),
)

#: The counts of each census (one row per census, thinned with age): the
#: figures every API replica reports, and the history behind the trends.
census = sa.Table(
    "census",
    metadata,
    sa.Column("id", _bigint_pk(), primary_key=True, autoincrement=True),
    sa.Column("at", UTCDateTime, nullable=False),
    # per type, tasks per level: {"type": {"OK": n, "WARNING": n, "ERROR": n}}
    sa.Column("conditions", _json(), nullable=False),
    # tasks per type and status: [[type, status, n], ...]
    sa.Column("tasks", _json(), nullable=False),
    sa.Column("not_ok", sa.BigInteger, nullable=False),
    # tasks assessed by the refresh that ended with this census, and its time
    sa.Column("assessed", sa.BigInteger, nullable=False),
    sa.Column("took", sa.Float, nullable=False),
    # the type fingerprints the ledger was brought to, and where the sweep stands
    sa.Column("versions", _json(), nullable=False),
    sa.Column("sweep_after", sa.BigInteger, nullable=False),
    sa.Index(None, "at"),
)

#: The latest forecasts (:mod:`~..simulator.forecast`), each as its JSON: what
#: ``GET /forecast`` and ``/metrics`` report on every API replica (the last
#: few kept; 0024_forecast.py).
forecast = sa.Table(
    "forecast",
    metadata,
    sa.Column("id", _bigint_pk(), primary_key=True, autoincrement=True),
    # the instant it starts from, and the seconds computing it took
    sa.Column("at", UTCDateTime, nullable=False),
    sa.Column("took", sa.Float, nullable=False),
    sa.Column("body", _json(), nullable=False),
)
