"""Console sessions that can end, and one-time login links.

* ``console_session``: one row per console login. The cookie stays signed
  as before, and is honoured only while its row is open: logout ends the
  row, "log out everywhere" ends every row of a token, and a row not seen
  within the idle time is over. A cookie copied before logout is then
  worthless.
* ``console_link``: one row per one-time login link (``standalone``,
  ``swh scheduler console-link``): its code opens one session, within
  minutes; the secret token never appears in a URL.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_session",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_console_session")),
    )
    op.create_index(op.f("ix_console_session_token"), "console_session", ["token"])
    op.create_index(op.f("ix_console_session_opened_at"), "console_session", ["opened_at"])
    op.create_table(
        "console_link",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_console_link")),
    )
    op.create_index(op.f("ix_console_link_expires_at"), "console_link", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_console_link_expires_at"), table_name="console_link")
    op.drop_table("console_link")
    op.drop_index(op.f("ix_console_session_opened_at"), table_name="console_session")
    op.drop_index(op.f("ix_console_session_token"), table_name="console_session")
    op.drop_table("console_session")
