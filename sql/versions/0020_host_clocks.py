"""How far each host's clock is from the database's: ``host_clock`` and
``worker.clock_offset``.

Only the database's clock decides (whether a task is due, expiries, next
starts): each runner, monitor and listener measures the offset of its host's
clock against the database's (the database's instant minus the host's, in
seconds: positive when the host is behind) and records it here with the
database's instant it was measured at, so that ``/health`` can name a host
whose clock is off. A worker's offset is measured by the listener from its
heartbeats (``worker.clock_offset``: its events' instants are moved by it).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_clock",
        sa.Column("holder", sa.Text(), primary_key=True),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("offset_seconds", sa.Float(), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("worker") as batch:
        batch.add_column(sa.Column("clock_offset", sa.Float()))


def downgrade() -> None:
    with op.batch_alter_table("worker") as batch:
        batch.drop_column("clock_offset")
    op.drop_table("host_clock")
