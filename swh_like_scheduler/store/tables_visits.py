"""The origin-visit scheduler's tables (listers, listed origins, visit
statistics, queue positions, metrics): part of the schema of
:mod:`.tables`, which hands them out with the rest."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement

from .tables_base import UTCDateTime, _bytewise, _in, _json, metadata

#: Listers: one per kind of forge and instance; ``current_state`` is what
#: the lister resumes from, ``updated`` the token an update must present.
lister = sa.Table(
    "lister",
    metadata,
    sa.Column("id", _bytewise(sa.Text()), primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("instance_name", sa.Text, nullable=False),
    sa.Column("current_state", _json(), nullable=False),
    sa.Column("created", UTCDateTime, nullable=False),
    sa.Column("updated", UTCDateTime, nullable=False),
    sa.Column("last_listing_finished_at", UTCDateTime),
    sa.Column("first_visits_queue_prefix", sa.Text),
    sa.Column("first_visits_scheduled_at", UTCDateTime),
    sa.UniqueConstraint("name", "instance_name"),
)

#: The origins listers reported (one row per lister, url and visit type);
#: ``first_seen``/``last_seen`` are when it was first and last recorded,
#: ``last_update`` the forge's own date of the origin's last change.
listed_origin = sa.Table(
    "listed_origin",
    metadata,
    sa.Column(
        "lister_id",
        _bytewise(sa.Text()),
        sa.ForeignKey("lister.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("url", _bytewise(sa.Text()), primary_key=True),
    sa.Column("visit_type", sa.Text, primary_key=True),
    sa.Column("extra_loader_arguments", _json(), nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("first_seen", UTCDateTime, nullable=False),
    sa.Column("last_seen", UTCDateTime, nullable=False),
    sa.Column("last_update", UTCDateTime),
    sa.Column("is_fork", sa.Boolean),
    sa.Column("forked_from_url", sa.Text),
    # an origin's rows by url (its statistics' key), whatever the lister
    sa.Index("ix_listed_origin_url_visit_type", "url", "visit_type"),
    # first_visits_after_listing's order, one lister's enabled origins
    # (store/sql_grab.py; sql/versions/0023_first_visits_index.py)
    sa.Index(
        "ix_listed_origin_first_visits",
        "lister_id",
        "visit_type",
        "last_update",
        "first_seen",
        "url",
        postgresql_where=sa.text("enabled"),
        sqlite_where=sa.text("enabled"),
    ),
)


class _ByDialect(ColumnElement[Any]):
    """A generated column's expression, written for each dialect."""

    inherit_cache = False

    def __init__(self, type_: sa.types.TypeEngine[Any], sqlite: str, postgresql: str) -> None:
        self.type = type_
        self.texts = {"sqlite": sqlite, "postgresql": postgresql}


@compiles(_ByDialect)
def _by_dialect(element: _ByDialect, compiler: Any, **kw: Any) -> str:
    return element.texts[compiler.dialect.name]


#: When an origin's freshness promise falls due (visits/condition.py): the
#: last visit plus its interval, its first sighting if never visited, or the
#: forge's change after the last success, if that is sooner.
_DUE = (
    "CASE WHEN last_update > last_successful"
    " AND last_update < COALESCE(next_visit_due, first_seen)"
    " THEN last_update ELSE COALESCE(next_visit_due, first_seen) END"
)


def _generated(type_: sa.types.TypeEngine[Any], sqlite: str, postgresql: str) -> sa.Computed:
    return sa.Computed(_ByDialect(type_, sqlite, postgresql), persisted=True)


#: what the policies of store/sql_grab.py filter on (any lister enables
#: it, and it is in no long cooldown: visits/policy.py, ``hold_of``)
_LISTED = "enabled AND first_seen IS NOT NULL AND held IS NULL"
_PENDING = f"{_LISTED} AND last_update > last_successful"


def _policy_index(table: sa.Table, name: str, *columns: Any, where: str = _LISTED) -> None:
    sa.Index(
        f"ix_{table.name}_{name}",
        table.c.visit_type,
        *columns,
        table.c.url,
        postgresql_where=sa.text(where),
        sqlite_where=sa.text(where),
    )


#: What the visits of each origin and visit type found (visits/model.py),
#: and what the visit policies order by: the listed origins' ``enabled``,
#: ``first_seen`` and forge date (``last_update``) summed over the listers
#: that list it (store/sql_origins.py keeps them), and columns the database
#: computes from them. One row per listed origin: each policy reads one
#: partial index of this table in its own order.
origin_visit_stats = sa.Table(
    "origin_visit_stats",
    metadata,
    sa.Column("url", _bytewise(sa.Text()), primary_key=True),
    sa.Column("visit_type", sa.Text, primary_key=True),
    sa.Column("last_successful", UTCDateTime),
    sa.Column("last_visit", UTCDateTime),
    sa.Column("last_visit_status", sa.Text),
    sa.Column("last_scheduled", UTCDateTime),
    sa.Column("last_snapshot", _bytewise(sa.String(40))),
    sa.Column("next_visit_queue_position", UTCDateTime),
    sa.Column("next_position_offset", sa.Integer, nullable=False),
    # the deadline policy's: the last visit plus the origin's interval
    sa.Column("next_visit_due", UTCDateTime),
    sa.Column("successive_visits", sa.Integer, nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.false()),
    # the lister whose metrics count the origin: an enabling one, the first by id
    sa.Column("lister_id", _bytewise(sa.Text())),
    sa.Column("first_seen", UTCDateTime),
    sa.Column("last_update", UTCDateTime),
    sa.Column("due_at", UTCDateTime, _generated(UTCDateTime(), _DUE, _DUE)),
    # seconds from the last success to the forge's later change
    sa.Column(
        "lag",
        sa.Float,
        _generated(
            sa.Float(),
            "(julianday(last_update) - julianday(last_successful)) * 86400.0",
            "EXTRACT(EPOCH FROM last_update - last_successful)",
        ),
    ),
    # never scheduled first (NULLS FIRST, which SQLite's indexes cannot say)
    sa.Column(
        "scheduled_order",
        UTCDateTime,
        _generated(
            UTCDateTime(),
            "COALESCE(last_scheduled, '')",
            "COALESCE(last_scheduled, '-infinity'::timestamptz)",
        ),
    ),
    sa.Column(
        "queue_order",
        UTCDateTime,
        _generated(
            UTCDateTime(),
            "COALESCE(next_visit_queue_position, '')",
            "COALESCE(next_visit_queue_position, '-infinity'::timestamptz)",
        ),
    ),
    # the long cooldown the origin is in, and since when (until a claim
    # finds it over: store/sql_grab.py)
    sa.Column("held", sa.Text),
    sa.Column("held_since", UTCDateTime),
    sa.CheckConstraint(
        _in("last_visit_status", ["successful", "failed", "not_found"]),
        name="last_visit_status",
    ),
    sa.CheckConstraint(_in("held", ["sent", "failed", "not_found"]), name="held"),
    sa.CheckConstraint("next_position_offset >= 0", name="next_position_offset"),
    sa.CheckConstraint("successive_visits >= 0", name="successive_visits"),
)
_stats = origin_visit_stats.c
_policy_index(origin_visit_stats, "scheduled", _stats.scheduled_order)
_policy_index(
    origin_visit_stats,
    "never_visited",
    _stats.last_update,
    where=f"{_LISTED} AND last_successful IS NULL AND last_update IS NOT NULL",
)
_policy_index(origin_visit_stats, "lag", _stats.lag.desc(), where=_PENDING)
_policy_index(
    origin_visit_stats, "queue", _stats.queue_order, where=f"{_LISTED} AND last_update IS NULL"
)
_policy_index(
    origin_visit_stats,
    "unvisited",
    _stats.scheduled_order,
    where=f"{_LISTED} AND last_successful IS NULL",
)
_policy_index(origin_visit_stats, "due", _stats.due_at)
sa.Index(
    "ix_origin_visit_stats_held",
    _stats.visit_type,
    _stats.held,
    _stats.held_since,
    postgresql_where=sa.text("held IS NOT NULL"),
    sqlite_where=sa.text("held IS NOT NULL"),
)

#: Per visit type, the position of the queue of origins without a forge
#: date: an origin is due once the queue has moved past its own position.
visit_queue_position = sa.Table(
    "visit_queue_position",
    metadata,
    sa.Column("visit_type", sa.Text, primary_key=True),
    sa.Column("position", UTCDateTime, nullable=False),
)

#: Per lister and visit type, how its origins stand (``update_metrics``).
origin_metrics = sa.Table(
    "origin_metrics",
    metadata,
    sa.Column(
        "lister_id",
        _bytewise(sa.Text()),
        sa.ForeignKey("lister.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("visit_type", sa.Text, primary_key=True),
    sa.Column("last_update", UTCDateTime, nullable=False),
    sa.Column("origins_known", sa.BigInteger, nullable=False),
    sa.Column("origins_enabled", sa.BigInteger, nullable=False),
    sa.Column("origins_never_visited", sa.BigInteger, nullable=False),
    sa.Column("origins_with_pending_changes", sa.BigInteger, nullable=False),
    # enabled, no visit ended (0022_metrics_never_attempted.py)
    sa.Column("origins_never_attempted", sa.BigInteger, nullable=False, server_default="0"),
    # the enabled origins per condition (visits/condition.py)
    sa.Column("origins_ok", sa.BigInteger, nullable=False),
    sa.Column("origins_warning", sa.BigInteger, nullable=False),
    sa.Column("origins_error", sa.BigInteger, nullable=False),
)

# -- console sessions (sql/versions/0015_console_sessions.py) -------------------
