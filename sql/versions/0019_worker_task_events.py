"""Workers that take tasks without sending task events: ``worker.blind_*``.

A Celery worker started without ``-E`` sends heartbeats but no task event:
the runs it takes are never seen to start or end. The listener turns task
events on where it can (Celery's ``enable_events`` remote control); a
worker seen taking tasks while none of its task events arrives, or whose
events were off until turned on, gets a window here: from ``blind_since``
(its events off, on its own clock) until ``blind_until`` (turned on, or a
task event seen again; ``NULL`` while it lasts), with the Celery task
names it ran meanwhile when known (``blind_tasks``, a JSON list; ``NULL``:
unknown, any). While that worker's process is alive, the runs dispatched
before the window ended that never started are not published again (they
may have run there). Not indexed: a few rows.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("worker") as batch:
        batch.add_column(sa.Column("blind_since", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("blind_until", sa.DateTime(timezone=True)))
        batch.add_column(
            sa.Column("blind_tasks", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"))
        )


def downgrade() -> None:
    with op.batch_alter_table("worker") as batch:
        batch.drop_column("blind_tasks")
        batch.drop_column("blind_until")
        batch.drop_column("blind_since")
