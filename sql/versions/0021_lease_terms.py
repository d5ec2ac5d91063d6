"""The monitor's steal settings, published for the workers: ``lease_terms``.

The monitor takes a run from its copy once the process running the body has
not renewed it for ``--ping-timeout`` plus ``--grace``. The monitor holding
its lock writes those two settings here at each pass (one row named
``monitor``, with the holder and the database's instant); every worker
process reads them at its first start and then every minute, and stops
counting a body as the run's owner once its renewals have not succeeded for
three quarters of the ping timeout (self-fencing): the bound is configured
once, on the monitor. Without a row, workers assume the monitor's defaults
(30 s and 30 s).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lease_terms",
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("ping_timeout", sa.Float(), nullable=False),
        sa.Column("grace", sa.Float(), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("lease_terms")
