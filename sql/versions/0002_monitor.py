"""Monitor duties: the workers seen by the listener, and the monitor's lock.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker",
        sa.Column("hostname", sa.Text(), nullable=False),
        sa.Column("last_heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("online", sa.Boolean(), nullable=False),
        sa.Column("freq", sa.Float()),
        sa.PrimaryKeyConstraint("hostname", name=op.f("pk_worker")),
    )
    op.create_table(
        "scheduler_lock",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_scheduler_lock")),
    )


def downgrade() -> None:
    op.drop_table("scheduler_lock")
    op.drop_table("worker")
