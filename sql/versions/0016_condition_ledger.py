"""The condition ledger: schedule health counted from an index.

* ``task_condition``: one row per watched task (waiting, scheduled,
  disabled) with its level as the census last assessed it, the instant
  that level may change with the clock alone, and the task's own values
  it was assessed on; deleted with its task (no foreign key: its check
  would lock the task row against claims);
* ``ix_task_updated_at``: the tasks changed since an instant, which the
  census assesses again.
* ``census``: the counts of each census with its instant, read by every
  API replica, and the history behind the console's trends (it survives
  restarts).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    instant = sa.DateTime(timezone=True)
    op.create_table(
        "task_condition",
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("rank", sa.SmallInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("finish_by", instant, nullable=True),
        sa.Column("holds_until", instant, nullable=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("priority", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("seen_updated_at", instant, nullable=False),
        sa.Column("seen_started_at", instant, nullable=True),
        sa.Column("seen_status", sa.Text(), nullable=False),
        sa.Column("type_seen", sa.Text(), nullable=False),
        sa.Column("assessed_at", instant, nullable=False),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_task_condition")),
    )
    op.create_index(op.f("ix_task_condition_holds_until"), "task_condition", ["holds_until"])
    op.create_index(
        op.f("ix_task_condition_rank_finish_by_task_id"),
        "task_condition",
        ["rank", "finish_by", "task_id"],
    )
    op.create_index(
        op.f("ix_task_condition_type_rank_seen_status"),
        "task_condition",
        ["type", "rank", "seen_status"],
    )
    scheduled = sa.text("seen_status = 'scheduled'")
    op.create_index(
        "ix_task_condition_scheduled",
        "task_condition",
        ["task_id"],
        postgresql_where=scheduled,
        sqlite_where=scheduled,
    )
    op.create_index("ix_task_updated_at", "task", ["updated_at"])
    op.create_table(
        "census",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
            autoincrement=True,
        ),
        sa.Column("at", instant, nullable=False),
        sa.Column("conditions", _json(), nullable=False),
        sa.Column("tasks", _json(), nullable=False),
        sa.Column("not_ok", sa.BigInteger(), nullable=False),
        sa.Column("assessed", sa.BigInteger(), nullable=False),
        sa.Column("took", sa.Float(), nullable=False),
        sa.Column("versions", _json(), nullable=False),
        sa.Column("sweep_after", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_census")),
    )
    op.create_index(op.f("ix_census_at"), "census", ["at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_census_at"), table_name="census")
    op.drop_table("census")
    op.drop_index("ix_task_updated_at", table_name="task")
    op.drop_index("ix_task_condition_scheduled", table_name="task_condition")
    op.drop_index(op.f("ix_task_condition_type_rank_seen_status"), table_name="task_condition")
    op.drop_index(op.f("ix_task_condition_rank_finish_by_task_id"), table_name="task_condition")
    op.drop_index(op.f("ix_task_condition_holds_until"), table_name="task_condition")
    op.drop_table("task_condition")
