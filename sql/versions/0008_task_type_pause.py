"""Pausing a task type: ``task_type.paused_at``.

An operator may pause a task type (``swh scheduler task-type pause``):
while ``paused_at`` is set (the instant it was paused, UTC) no runner pass
claims or publishes a task of that type; its tasks keep waiting and runs
already dispatched finish normally. ``NULL``: not paused (every existing
type).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("task_type") as batch:
        batch.add_column(sa.Column("paused_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("task_type") as batch:
        batch.drop_column("paused_at")
