"""Alembic environment: migrates the connection handed over by
:mod:`swh_like_scheduler.store.migrations` (or, from the ``alembic`` command, the
``sqlalchemy.url`` of its configuration)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from swh_like_scheduler.store.engine import WRITE_OPTION, make_engine
from swh_like_scheduler.store.migrations import without_statement_timeout
from swh_like_scheduler.store.tables import metadata

config = context.config


def _migrate(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run() -> None:
    if context.is_offline_mode():
        raise SystemExit("offline (--sql) migrations are not supported")
    connection = config.attributes.get("connection")
    if connection is not None:
        _migrate(connection)
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url") or "", role="cli")
    try:
        with engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            without_statement_timeout(conn)
            _migrate(conn)
            conn.commit()
    finally:
        engine.dispose()


run()
