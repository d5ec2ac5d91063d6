"""Fewer and cheaper index writes per claimed task.

A claim updates each task (a new row version: an entry in every index whose
predicate the new version matches) and inserts its run. Three of those
entries are avoidable or costlier than they need be:

- ``uq_task_key`` held an entry for every task, most of which have no key
  (NULL keys never conflict). It is now a unique index over the tasks that
  have one.
- ``ix_task_run_ended`` held an entry for every open run (``ended`` NULL);
  the retention duty only looks for runs ended before a time. It now covers
  ended runs only.
- ``arguments_hash`` and ``backend_id`` are hexadecimal digests and UUIDs
  compared with the database's collation (``strcoll`` unless it is "C"). On
  PostgreSQL they now use the "C" collation: the same equality, compared
  byte by byte. (SQLite compares bytes already.)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_HAS_KEY = "key IS NOT NULL"
_ENDED = "ended IS NOT NULL"


def _partial(name: str, table: str, column: str, where: str, unique: bool = False) -> None:
    op.create_index(
        name,
        table,
        [column],
        unique=unique,
        postgresql_where=sa.text(where),
        sqlite_where=sa.text(where),
    )


def _collations(collation: str | None) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.alter_column(
        "task",
        "arguments_hash",
        type_=sa.String(64, collation=collation),
        existing_type=sa.String(64),
        existing_nullable=False,
    )
    op.alter_column(
        "task_run",
        "backend_id",
        type_=sa.Text(collation=collation),
        existing_type=sa.Text(),
        existing_nullable=False,
    )


def upgrade() -> None:
    with op.batch_alter_table("task") as batch:
        batch.drop_constraint("uq_task_key", type_="unique")
    _partial("uq_task_key", "task", "key", _HAS_KEY, unique=True)
    op.drop_index("ix_task_run_ended", table_name="task_run")
    _partial("ix_task_run_ended", "task_run", "ended", _ENDED)
    _collations("C")


def downgrade() -> None:
    _collations("default")
    op.drop_index("ix_task_run_ended", table_name="task_run")
    op.create_index("ix_task_run_ended", "task_run", ["ended"])
    op.drop_index("uq_task_key", table_name="task")
    with op.batch_alter_table("task") as batch:
        batch.create_unique_constraint("uq_task_key", ["key"])
