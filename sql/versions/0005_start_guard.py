"""The start guard of every task type.

- ``worker.pid``: the process id of each worker's main process. A worker
  killed by SIGKILL and started again under the same name sends
  ``worker-online`` from a new process: the listener compares its ``pid``
  with the one recorded and ends the runs the old process left open. A
  broker reconnect sends offline/online from the same process, which is no
  death.
- ``ix_task_owned`` covers the tasks whose owner pings (leases) instead of
  every owned task: the guard of a plain run sets ``owner_tag`` without a
  ping, and a column in an index predicate that changes keeps PostgreSQL
  from updating the row in place (HOT) — one more index write per start.

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


def _owned_index(where: str) -> None:
    op.drop_index("ix_task_owned", table_name="task")
    op.create_index(
        "ix_task_owned",
        "task",
        ["owner_last_ping_at"],
        postgresql_where=sa.text(where),
        sqlite_where=sa.text(where),
    )


def upgrade() -> None:
    with op.batch_alter_table("worker") as batch:
        batch.add_column(sa.Column("pid", sa.Integer))
    _owned_index("owner_last_ping_at IS NOT NULL")


def downgrade() -> None:
    _owned_index("owner_tag IS NOT NULL")
    with op.batch_alter_table("worker") as batch:
        batch.drop_column("pid")
