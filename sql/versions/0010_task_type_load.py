"""The monitor's measurement of a task type's load: ``task_type.load_*``.

The monitor measures, per task type, its adaptive tasks' demand (the
worker-seconds per second they ask for at their current intervals), the
work their runs delivered over the last window, how many wait overdue, and
when (``measure_type_loads``); the capacity-aware interval rule reads them.
``NULL``: never measured (every existing type), and the per-task rule
applies alone.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("task_type") as batch:
        batch.add_column(sa.Column("load_demand", sa.Float))
        batch.add_column(sa.Column("load_delivered", sa.Float))
        batch.add_column(sa.Column("load_backlog", sa.Integer))
        batch.add_column(sa.Column("load_measured_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("task_type") as batch:
        batch.drop_column("load_measured_at")
        batch.drop_column("load_backlog")
        batch.drop_column("load_delivered")
        batch.drop_column("load_demand")
