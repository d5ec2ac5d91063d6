"""Initial schema: task types, tasks and task runs.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

WAITING = sa.text("status = 'waiting'")
LIVE_WITHOUT_KEY = sa.text("key IS NULL AND status IN ('waiting', 'scheduled')")
OPEN_RUN = sa.text("status IN ('scheduled', 'started')")


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _id() -> sa.Column:
    return sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    )


def _ts(name: str, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _partial_index(name: str, table: str, columns: list[str], where, unique=False) -> None:
    op.create_index(name, table, columns, unique=unique, postgresql_where=where, sqlite_where=where)


def upgrade() -> None:
    op.create_table(
        "task_type",
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("backend_name", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text()),
        sa.Column("default_interval", sa.Interval()),
        sa.Column("min_interval", sa.Interval()),
        sa.Column("max_interval", sa.Interval()),
        sa.Column("backoff_factor", sa.Float()),
        sa.Column("max_queue_length", sa.Integer()),
        sa.Column("num_retries", sa.Integer()),
        sa.Column("retry_delay", sa.Interval(), nullable=False),
        sa.Column("retry_growth", sa.Float(), nullable=False),
        sa.Column("retry_cap", sa.Interval(), nullable=False),
        sa.Column("retry_jitter", sa.Interval(), nullable=False),
        sa.Column("max_expected_duration", sa.Interval()),
        sa.Column("max_allowed_duration", sa.Interval()),
        sa.Column("uses_lease", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.CheckConstraint("backoff_factor > 1", name=op.f("ck_task_type_backoff_factor")),
        sa.CheckConstraint("max_queue_length >= 0", name=op.f("ck_task_type_max_queue_length")),
        sa.CheckConstraint("num_retries >= 0", name=op.f("ck_task_type_num_retries")),
        sa.PrimaryKeyConstraint("type", name=op.f("pk_task_type")),
    )
    op.create_table(
        "task",
        _id(),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("arguments", _json(), nullable=False),
        sa.Column("arguments_hash", sa.String(length=64), nullable=False),
        sa.Column("key", sa.Text()),
        sa.Column("schedule_kind", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("priority", sa.Text(), nullable=False),
        _ts("next_run", nullable=False),
        _ts("deadline", nullable=False),
        sa.Column("current_interval", sa.Interval()),
        sa.Column("period", sa.Interval()),
        sa.Column("cooldown", sa.Interval()),
        sa.Column("cron", sa.Text()),
        sa.Column("cron_max_duration", sa.Interval()),
        sa.Column("max_delay", sa.Interval()),
        sa.Column("tz", sa.Text(), server_default="UTC", nullable=False),
        sa.Column("blackout_periods", _json(), nullable=False),
        sa.Column("dont_run_on_nodes", _json(), nullable=False),
        sa.Column("max_expected_duration", sa.Interval()),
        sa.Column("max_allowed_duration", sa.Interval()),
        sa.Column("expected_duration", sa.Interval()),
        sa.Column("retries_left", sa.Integer(), server_default="0", nullable=False),
        sa.Column("failure_count", sa.Integer(), server_default="0", nullable=False),
        _ts("last_good_start_at"),
        _ts("last_good_end_at"),
        _ts("last_start_at"),
        _ts("last_end_at"),
        sa.Column("average_good_duration", sa.Interval()),
        sa.Column("owner_node", sa.Text()),
        sa.Column("owner_name", sa.Text()),
        sa.Column("owner_tag", sa.Text()),
        _ts("owner_started_at"),
        _ts("owner_last_ping_at"),
        _ts("steal_start_at"),
        _ts("created_at", nullable=False),
        _ts("updated_at", nullable=False),
        sa.CheckConstraint("priority IN ('high', 'normal', 'low')", name=op.f("ck_task_priority")),
        sa.CheckConstraint(
            "schedule_kind IN ('oneshot', 'periodic', 'cron', 'adaptive')",
            name=op.f("ck_task_schedule_kind"),
        ),
        sa.CheckConstraint(
            "status IN ('waiting', 'scheduled', 'completed', 'disabled', 'cancelled')",
            name=op.f("ck_task_status"),
        ),
        sa.CheckConstraint("failure_count >= 0", name=op.f("ck_task_failure_count")),
        sa.CheckConstraint("retries_left >= 0", name=op.f("ck_task_retries_left")),
        sa.ForeignKeyConstraint(
            ["type"], ["task_type.type"], name=op.f("fk_task_type_task_type"), onupdate="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task")),
        sa.UniqueConstraint("key", name=op.f("uq_task_key")),
    )
    _partial_index("ix_task_ready", "task", ["type", "next_run"], WAITING)
    _partial_index("ix_task_dispatch_order", "task", ["type", "priority", "deadline"], WAITING)
    _partial_index(
        "ux_task_identical",
        "task",
        ["arguments_hash", "type", "schedule_kind", "priority"],
        LIVE_WITHOUT_KEY,
        unique=True,
    )
    op.create_table(
        "task_run",
        _id(),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("backend_id", sa.Text(), nullable=False),
        _ts("slot", nullable=False),
        _ts("scheduled", nullable=False),
        _ts("started"),
        _ts("ended"),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("worker", sa.Text()),
        sa.Column("error", sa.Text()),
        sa.Column("progress", sa.Float()),
        sa.Column("result", _json()),
        sa.Column("history", _json(), nullable=False),
        sa.CheckConstraint(
            "status IN ('scheduled', 'started', 'eventful', 'uneventful', 'failed', "
            "'permfailed', 'lost', 'cancelled', 'timed_out')",
            name=op.f("ck_task_run_status"),
        ),
        sa.CheckConstraint("progress >= 0 AND progress <= 1", name=op.f("ck_task_run_progress")),
        sa.ForeignKeyConstraint(
            ["task_id"], ["task.id"], name=op.f("fk_task_run_task_id_task"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_run")),
        sa.UniqueConstraint("backend_id", name=op.f("uq_task_run_backend_id")),
        sa.UniqueConstraint("task_id", "slot", name=op.f("uq_task_run_task_id_slot")),
    )
    op.create_index("ix_task_run_ended", "task_run", ["ended"])
    _partial_index("ix_task_run_open", "task_run", ["scheduled"], OPEN_RUN)


def downgrade() -> None:
    op.drop_table("task_run")
    op.drop_table("task")
    op.drop_table("task_type")
