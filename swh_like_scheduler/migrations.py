"""Creating and upgrading the database schema with Alembic.

The migration scripts live in the repository's ``sql/`` folder, installed
as the ``swh_like_scheduler.sql`` package.
"""

from __future__ import annotations

import logging
from importlib import resources

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from .exceptions import SchemaMismatch
from .store.engine import WRITE_OPTION
from .store.errors import translated


class _Preamble(logging.Filter):
    """Drops the two lines Alembic logs whenever it looks at a database
    ("Context impl SQLiteImpl.", "Will assume non-transactional DDL."):
    every daemon and command reads the schema's revision at start. What a
    migration that runs logs ("Running upgrade 0007 -> 0008") stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(("Context impl ", "Will assume "))


_PREAMBLE = _Preamble()


def _quiet_preamble() -> None:
    logger = logging.getLogger("alembic.runtime.migration")
    if _PREAMBLE not in logger.filters:
        logger.addFilter(_PREAMBLE)


def alembic_config() -> Config:
    """An Alembic configuration pointing at the installed migration scripts."""
    config = Config()
    config.set_main_option("script_location", str(resources.files("swh_like_scheduler.sql")))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration scripts are installed"
    return head


def current_revision(engine: sa.Engine) -> str | None:
    """The revision the database is at, ``None`` for an empty database."""
    _quiet_preamble()
    with translated("read schema version"), engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def without_statement_timeout(conn: sa.Connection) -> None:
    """No statement timeout for the rest of ``conn``'s transaction
    (PostgreSQL), whatever the database URL says: a migration rewrites
    tables and builds indexes for as long as their size takes, and one
    cancelled half-way is rolled back whole, to be run again for as long."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.set_config("statement_timeout", "0", True)))


def upgrade(engine: sa.Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (creating it in an empty database),
    in one transaction without a statement timeout."""
    config = alembic_config()
    _quiet_preamble()
    with translated("upgrade schema"), engine.connect() as conn:
        conn.execution_options(**{WRITE_OPTION: True})
        without_statement_timeout(conn)
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
        conn.commit()


def is_empty(engine: sa.Engine) -> bool:
    """Whether the database holds no table at all (nothing of ours or anyone's)."""
    with translated("list tables"), engine.connect() as conn:
        return not sa.inspect(conn).get_table_names()


def is_current(engine: sa.Engine) -> bool:
    return current_revision(engine) == head_revision()


def check(engine: sa.Engine) -> None:
    """Raise :class:`SchemaMismatch` unless the schema is at the head revision."""
    current = current_revision(engine)
    if current is None:
        raise SchemaMismatch("the database has no scheduler schema; run `swh scheduler db init`")
    if current != head_revision():
        raise SchemaMismatch(
            f"the database schema is at revision {current}, this version needs "
            f"{head_revision()}; run `swh scheduler db upgrade`"
        )
