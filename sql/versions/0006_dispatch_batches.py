"""Dispatch batches: tell a message never published from one waiting in a queue.

A claim creates its runs and commits before their messages are published.
A runner that dies (or whose broker fails) in between leaves runs that
look exactly like runs whose messages wait in a queue, so both waited for
``--republish-after`` (5 minutes by default) and both were sent again.

- ``dispatch_batch``: one row per claim (and per re-publication), with
  ``published_at`` set once its messages are on the broker.
- ``task_run.batch_id``: the batch a run was claimed in. Existing runs keep
  NULL, which counts as published when the run was scheduled.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_UNPUBLISHED = "published_at IS NULL"


def upgrade() -> None:
    op.create_table(
        "dispatch_batch",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dispatch_batch")),
    )
    op.create_index(
        "ix_dispatch_batch_claimed_at",
        "dispatch_batch",
        ["claimed_at"],
        postgresql_where=sa.text(_UNPUBLISHED),
        sqlite_where=sa.text(_UNPUBLISHED),
    )
    with op.batch_alter_table("task_run") as batch:
        batch.add_column(sa.Column("batch_id", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("task_run") as batch:
        batch.drop_column("batch_id")
    op.drop_index("ix_dispatch_batch_claimed_at", table_name="dispatch_batch")
    op.drop_table("dispatch_batch")
