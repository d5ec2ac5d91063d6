"""Fencing tokens, and the ``superseded`` run status.

Every start the guard grants raises its task's ``fence`` by one and writes
the new value on the run it starts (``task_run.fence``): a token that grows
with each start of a task. An end reported for a run whose token is older
than its task's (another copy started after it: the first was taken away
because the process running its body went silent) is recorded with the
status ``superseded`` and never applied to the task. Existing tasks start
at 0; existing runs have no token (``NULL``).

Neither column is indexed: the guard's write still updates the task row in
place (HOT) on PostgreSQL.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_RUN_STATUSES = (
    "scheduled",
    "started",
    "eventful",
    "uneventful",
    "failed",
    "permfailed",
    "lost",
    "cancelled",
    "timed_out",
    "skipped",
)


def _run_statuses(names: tuple[str, ...]) -> None:
    check = f"status IN ({', '.join(repr(n) for n in names)})"
    with op.batch_alter_table("task_run") as batch:
        batch.drop_constraint(op.f("ck_task_run_status"), type_="check")
        batch.create_check_constraint(op.f("ck_task_run_status"), check)


def upgrade() -> None:
    with op.batch_alter_table("task") as batch:
        batch.add_column(sa.Column("fence", sa.BigInteger, nullable=False, server_default="0"))
    with op.batch_alter_table("task_run") as batch:
        batch.add_column(sa.Column("fence", sa.BigInteger))
    _run_statuses((*_RUN_STATUSES, "superseded"))


def downgrade() -> None:
    # a superseded end was a stale copy's: as a run, it was lost
    op.execute("UPDATE task_run SET status = 'lost' WHERE status = 'superseded'")
    _run_statuses(_RUN_STATUSES)
    with op.batch_alter_table("task_run") as batch:
        batch.drop_column("fence")
    with op.batch_alter_table("task") as batch:
        batch.drop_column("fence")
