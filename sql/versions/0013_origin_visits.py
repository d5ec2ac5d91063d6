"""Origin visits: listers, the origins they list, what visits found.

* ``lister``: one per kind of forge and instance (unique name and
  instance), the state it resumes from and the ``updated`` token an
  update must present;
* ``listed_origin``: one row per lister, url and visit type, with when it
  was first and last recorded and the forge's own last-update date;
* ``origin_visit_stats``: per url and visit type, the last visit, its
  outcome, the last success and its snapshot, the place in the visit
  type's queue;
* ``visit_queue_position``: per visit type, where that queue stands;
* ``origin_metrics``: per lister and visit type, the counts of
  ``update_metrics``.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine:
    from sqlalchemy.dialects import postgresql

    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _bytewise(text: sa.String) -> sa.types.TypeEngine:
    return text.with_variant(type(text)(text.length, collation="C"), "postgresql")


def _at() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "lister",
        sa.Column("id", _bytewise(sa.Text()), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("instance_name", sa.Text(), nullable=False),
        sa.Column("current_state", _json(), nullable=False),
        sa.Column("created", _at(), nullable=False),
        sa.Column("updated", _at(), nullable=False),
        sa.Column("last_listing_finished_at", _at()),
        sa.Column("first_visits_queue_prefix", sa.Text()),
        sa.Column("first_visits_scheduled_at", _at()),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lister")),
        sa.UniqueConstraint("name", "instance_name", name=op.f("uq_lister_name_instance_name")),
    )
    op.create_table(
        "listed_origin",
        sa.Column("lister_id", _bytewise(sa.Text()), nullable=False),
        sa.Column("url", _bytewise(sa.Text()), nullable=False),
        sa.Column("visit_type", sa.Text(), nullable=False),
        sa.Column("extra_loader_arguments", _json(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("first_seen", _at(), nullable=False),
        sa.Column("last_seen", _at(), nullable=False),
        sa.Column("last_update", _at()),
        sa.Column("is_fork", sa.Boolean()),
        sa.Column("forked_from_url", sa.Text()),
        sa.ForeignKeyConstraint(
            ["lister_id"],
            ["lister.id"],
            name=op.f("fk_listed_origin_lister_id_lister"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("lister_id", "url", "visit_type", name=op.f("pk_listed_origin")),
    )
    op.create_index(op.f("ix_listed_origin_url_visit_type"), "listed_origin", ["url", "visit_type"])
    op.create_table(
        "origin_visit_stats",
        sa.Column("url", _bytewise(sa.Text()), nullable=False),
        sa.Column("visit_type", sa.Text(), nullable=False),
        sa.Column("last_successful", _at()),
        sa.Column("last_visit", _at()),
        sa.Column("last_visit_status", sa.Text()),
        sa.Column("last_scheduled", _at()),
        sa.Column("last_snapshot", _bytewise(sa.String(40))),
        sa.Column("next_visit_queue_position", _at()),
        sa.Column("next_position_offset", sa.Integer(), nullable=False),
        sa.Column("next_visit_due", _at()),
        sa.Column("successive_visits", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "last_visit_status IN ('successful', 'failed', 'not_found')",
            name=op.f("ck_origin_visit_stats_last_visit_status"),
        ),
        sa.CheckConstraint(
            "next_position_offset >= 0", name=op.f("ck_origin_visit_stats_next_position_offset")
        ),
        sa.CheckConstraint(
            "successive_visits >= 0", name=op.f("ck_origin_visit_stats_successive_visits")
        ),
        sa.PrimaryKeyConstraint("url", "visit_type", name=op.f("pk_origin_visit_stats")),
    )
    op.create_table(
        "visit_queue_position",
        sa.Column("visit_type", sa.Text(), nullable=False),
        sa.Column("position", _at(), nullable=False),
        sa.PrimaryKeyConstraint("visit_type", name=op.f("pk_visit_queue_position")),
    )
    op.create_table(
        "origin_metrics",
        sa.Column("lister_id", _bytewise(sa.Text()), nullable=False),
        sa.Column("visit_type", sa.Text(), nullable=False),
        sa.Column("last_update", _at(), nullable=False),
        sa.Column("origins_known", sa.BigInteger(), nullable=False),
        sa.Column("origins_enabled", sa.BigInteger(), nullable=False),
        sa.Column("origins_never_visited", sa.BigInteger(), nullable=False),
        sa.Column("origins_with_pending_changes", sa.BigInteger(), nullable=False),
        sa.Column("origins_ok", sa.BigInteger(), nullable=False),
        sa.Column("origins_warning", sa.BigInteger(), nullable=False),
        sa.Column("origins_error", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["lister_id"],
            ["lister.id"],
            name=op.f("fk_origin_metrics_lister_id_lister"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("lister_id", "visit_type", name=op.f("pk_origin_metrics")),
    )


def downgrade() -> None:
    op.drop_table("origin_metrics")
    op.drop_table("visit_queue_position")
    op.drop_table("origin_visit_stats")
    op.drop_index(op.f("ix_listed_origin_url_visit_type"), table_name="listed_origin")
    op.drop_table("listed_origin")
    op.drop_table("lister")
