"""Which periodic tasks have the default cooldown: ``task.cooldown_is_default``.

A periodic task created without a cooldown gets the default one (90 % of
its period, less twice its expected duration). From this revision on, that
default follows the task's run time: each good run that updates the
average duration sets the cooldown again (the larger of the expected
duration and the average counts), so that a task whose runs take 6 minutes
of an hour is not late on every cycle. A cooldown a client gave (0
included) never moves. Once the average has moved a default cooldown, its
value no longer tells which it is: the column does.

Existing rows get it the way edits told until now: a periodic task whose
cooldown is exactly the default of its period and expected duration has
the default (computed in microseconds, as the code computes it); every
other task, ``false``. Not indexed.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

#: the part of its period the default cooldown keeps (policy.validate)
_SHARE = 0.9
#: the default, in microseconds, in PostgreSQL's exact arithmetic (numeric)
_PG_DEFAULT = """
UPDATE task SET cooldown_is_default = true
WHERE schedule_kind = 'periodic' AND period IS NOT NULL AND cooldown IS NOT NULL
  AND extract(epoch FROM cooldown) * 1000000 = greatest(
    0,
    round(extract(epoch FROM period) * 1000000 * 0.9)
      - 2 * coalesce(extract(epoch FROM expected_duration) * 1000000, 0)
  )
"""
_TASK = sa.table(
    "task",
    sa.column("id", sa.BigInteger),
    sa.column("schedule_kind", sa.Text),
    sa.column("period", sa.Interval),
    sa.column("cooldown", sa.Interval),
    sa.column("expected_duration", sa.Interval),
    sa.column("cooldown_is_default", sa.Boolean),
)


def _default(period: timedelta, expected: timedelta | None) -> timedelta:
    """``policy.validate.default_cooldown`` as it is at this revision."""
    cooldown = period * _SHARE - 2 * (expected or timedelta(0))
    return max(timedelta(0), timedelta(microseconds=round(cooldown / timedelta(microseconds=1))))


def _mark_sqlite() -> None:
    """The same rule read row by row (SQLite keeps intervals as instants
    after 1970: no arithmetic on them in SQL). An embedded database is small."""
    conn = op.get_bind()
    t = _TASK.c
    found = conn.execute(
        sa.select(t.id, t.period, t.cooldown, t.expected_duration).where(
            t.schedule_kind == "periodic", t.period.is_not(None), t.cooldown.is_not(None)
        )
    ).all()
    ids = [r.id for r in found if r.cooldown == _default(r.period, r.expected_duration)]
    for start in range(0, len(ids), 500):
        conn.execute(
            sa.update(_TASK)
            .where(t.id.in_(ids[start : start + 500]))
            .values(cooldown_is_default=True)
        )


def upgrade() -> None:
    with op.batch_alter_table("task") as batch:
        batch.add_column(
            sa.Column(
                "cooldown_is_default", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_DEFAULT)
    else:
        _mark_sqlite()


def downgrade() -> None:
    with op.batch_alter_table("task") as batch:
        batch.drop_column("cooldown_is_default")
