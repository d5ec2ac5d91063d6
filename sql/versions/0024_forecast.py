"""The latest forecasts: ``forecast``, one row per forecast recorded (its
instant, the seconds it took, its JSON), the last few kept; what every API
replica reports at ``GET /forecast`` and in ``/metrics``.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "forecast",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
            autoincrement=True,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("took", sa.Float(), nullable=False),
        sa.Column("body", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forecast")),
    )


def downgrade() -> None:
    op.drop_table("forecast")
