"""``origin_metrics.origins_never_attempted``: the enabled origins no visit
ended for (no finished visit's status recorded).

Until this revision ``origins_never_visited`` counted them; it now counts
as the reference does (enabled origins never visited successfully: a
failing one too), and the count it held keeps its own name. Existing rows
get 0 until the next ``update_metrics`` counts them again.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("origin_metrics") as batch:
        batch.add_column(
            sa.Column(
                "origins_never_attempted",
                sa.BigInteger(),
                nullable=False,
                server_default="0",
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("origin_metrics") as batch:
        batch.drop_column("origins_never_attempted")
