"""One installation, one identity: ``installation`` and who uses a worker name.

* ``installation``: one row, written at ``db init`` or the first use of the
  database (never by this migration, so that a copy made from an empty
  template still gets its own): the random id every process of the
  installation reads — the listener's default event queue is named after
  it, and the Celery task ids of new runs are derived in its namespace, so
  that two installations on one broker never take each other's events or
  messages for their own.
* ``worker.pid_since``, ``other_pid``, ``other_seen_at``: when the main
  process ``pid`` was first seen under the name, and the other process seen
  under the same name, until when. Two processes that both keep sending
  are two live workers under one name (a duplicate, logged), not a restart;
  a restart is a process that stopped sending while another took its name.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "installation",
        sa.Column("one", sa.Integer(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("one = 1", name=op.f("ck_installation_one_row")),
        sa.PrimaryKeyConstraint("one", name=op.f("pk_installation")),
    )
    with op.batch_alter_table("worker") as batch:
        batch.add_column(sa.Column("pid_since", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("other_pid", sa.Integer()))
        batch.add_column(sa.Column("other_seen_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("worker") as batch:
        batch.drop_column("other_seen_at")
        batch.drop_column("other_pid")
        batch.drop_column("pid_since")
    op.drop_table("installation")
