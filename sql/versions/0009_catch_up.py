"""Catch-up after missed firings: ``catch_up``, ``catch_up_grace``, ``skipped_until``
and the ``skipped`` run status.

A task type says what happens to the firings of its tasks missed while
nothing ran: ``catch_up`` is ``latest`` (run once, late: what every task did
before, so every existing type gets it) or ``skip`` (drop the firings later
than ``catch_up_grace`` and record them as one ``skipped`` run). ``NULL``
grace: the default (5 minutes). A task may override both (``NULL``: its
type's); ``skipped_until`` keeps the firing a skip resumed at. A partial
index finds the (rare) tasks with a setting of their own.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_CATCH_UP = "catch_up IN ('latest', 'skip')"
_OWN = "status = 'waiting' AND (catch_up IS NOT NULL OR catch_up_grace IS NOT NULL)"
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
)


def _statuses(names: tuple[str, ...]) -> str:
    return f"status IN ({', '.join(repr(n) for n in names)})"


def _run_statuses(names: tuple[str, ...]) -> None:
    with op.batch_alter_table("task_run", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_task_run_status"), type_="check")
        batch.create_check_constraint(op.f("ck_task_run_status"), _statuses(names))


def upgrade() -> None:
    with op.batch_alter_table("task_type") as batch:
        batch.add_column(sa.Column("catch_up", sa.Text, nullable=False, server_default="latest"))
        batch.add_column(sa.Column("catch_up_grace", sa.Interval))
        batch.create_check_constraint(op.f("ck_task_type_catch_up"), _CATCH_UP)
    with op.batch_alter_table("task") as batch:
        batch.add_column(sa.Column("catch_up", sa.Text))
        batch.add_column(sa.Column("catch_up_grace", sa.Interval))
        batch.add_column(sa.Column("skipped_until", sa.DateTime(timezone=True)))
        batch.create_check_constraint(op.f("ck_task_catch_up"), _CATCH_UP)
    op.create_index(
        "ix_task_catch_up",
        "task",
        ["type", "next_run"],
        postgresql_where=sa.text(_OWN),
        sqlite_where=sa.text(_OWN),
    )
    _run_statuses((*_RUN_STATUSES, "skipped"))


def downgrade() -> None:
    op.execute("DELETE FROM task_run WHERE status = 'skipped'")
    _run_statuses(_RUN_STATUSES)
    op.drop_index("ix_task_catch_up", table_name="task")
    with op.batch_alter_table("task") as batch:
        batch.drop_constraint(op.f("ck_task_catch_up"), type_="check")
        batch.drop_column("skipped_until")
        batch.drop_column("catch_up_grace")
        batch.drop_column("catch_up")
    with op.batch_alter_table("task_type") as batch:
        batch.drop_constraint(op.f("ck_task_type_catch_up"), type_="check")
        batch.drop_column("catch_up_grace")
        batch.drop_column("catch_up")
