"""The process id of each worker's main process.

A worker killed by SIGKILL and started again under the same name sends
``worker-online`` from a new process: the listener compares its ``pid``
with the one recorded and ends the runs the old process left open. A broker
reconnect sends offline/online from the same process, which is no death.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("worker") as batch:
        batch.add_column(sa.Column("pid", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("worker") as batch:
        batch.drop_column("pid")
