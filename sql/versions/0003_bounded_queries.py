"""Indexes that keep the runner's and the monitor's queries bounded.

- ``ix_task_dispatch_order`` ends with ``id``: the claim orders by
  ``deadline, id`` and reads the index in that order instead of sorting.
- ``ix_task_ready`` becomes (type, priority, next_run): the tasks of one
  class that are ready now are one index range, whatever the number of
  tasks not yet due (the claim reads that range when few tasks are due).
- ``ix_task_owned``: leases the steal step looks at (owned tasks only).
- ``ix_task_oneshot_waiting`` / ``ix_task_oneshot_finished``: the one-shot
  tasks the expiry and the retention duties look at.

Without them those passes read the whole task table.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_WAITING = "status = 'waiting'"
_ONESHOT_WAITING = "schedule_kind = 'oneshot' AND status = 'waiting'"
_ONESHOT_FINISHED = "schedule_kind = 'oneshot' AND status IN ('completed', 'disabled', 'cancelled')"
_OWNED = "owner_tag IS NOT NULL"


def _index(name: str, columns: list[str], where: str) -> None:
    op.create_index(
        name,
        "task",
        columns,
        postgresql_where=sa.text(where),
        sqlite_where=sa.text(where),
    )


def upgrade() -> None:
    op.drop_index("ix_task_dispatch_order", table_name="task")
    _index("ix_task_dispatch_order", ["type", "priority", "deadline", "id"], _WAITING)
    op.drop_index("ix_task_ready", table_name="task")
    _index("ix_task_ready", ["type", "priority", "next_run"], _WAITING)
    _index("ix_task_owned", ["owner_last_ping_at"], _OWNED)
    _index("ix_task_oneshot_waiting", ["next_run"], _ONESHOT_WAITING)
    _index("ix_task_oneshot_finished", ["updated_at"], _ONESHOT_FINISHED)


def downgrade() -> None:
    for name in ("ix_task_oneshot_finished", "ix_task_oneshot_waiting", "ix_task_owned"):
        op.drop_index(name, table_name="task")
    op.drop_index("ix_task_ready", table_name="task")
    _index("ix_task_ready", ["type", "next_run"], _WAITING)
    op.drop_index("ix_task_dispatch_order", table_name="task")
    _index("ix_task_dispatch_order", ["type", "priority", "deadline"], _WAITING)
