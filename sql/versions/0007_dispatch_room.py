"""Dispatch room: when a runner pass last had room for every ready task.

A one-shot task used to expire as soon as its should_start_by passed
without a start, even when that was because no runner had passed yet (a
claim a millisecond too early), the platform was down, or its queue was
full. ``dispatch_room`` records, per task type and priority class, the
``now`` of the latest runner pass that claimed every ready task with
capacity to spare; the monitor expires only one-shot tasks that such a
pass, after their deadline, still could not take.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dispatch_room",
        sa.Column("task_type", sa.Text, nullable=False),
        sa.Column("priority", sa.Text, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("task_type", "priority", name=op.f("pk_dispatch_room")),
    )


def downgrade() -> None:
    op.drop_table("dispatch_room")
