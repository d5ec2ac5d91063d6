"""Creating and upgrading the database schema with Alembic.

The migration scripts live in the repository's ``sql/`` folder, installed
as the ``swh_like_scheduler.sql`` package. Alembic is loaded only to
migrate: checking that a database is current (what every command and
daemon does first) reads its revision with one query and compares it with
:data:`HEAD`.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..domain.exceptions import SchemaMismatch
from .engine import WRITE_OPTION
from .errors import translated

if TYPE_CHECKING:
    from alembic.config import Config

#: the revision of the newest script in ``sql/versions`` (a test checks it
#: against Alembic's own reading of the scripts: change both together)
HEAD = "0024"

#: Alembic's record of a database's revision
_VERSION_TABLE = "alembic_version"


class _Preamble(logging.Filter):
    """Drops the lines Alembic logs whenever it looks at a database
    ("Context impl SQLiteImpl.", "Will assume non-transactional DDL.") and
    those of its plug-ins ("setup plugin alembic.autogenerate.schemas", one
    per plug-in, from Alembic 1.16): every daemon and command reads the
    schema's revision at start. What a migration that runs logs ("Running
    upgrade 0007 -> 0008") stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(
            ("Context impl ", "Will assume ", "setup plugin ")
        )


_PREAMBLE = _Preamble()
#: the loggers whose preamble lines are dropped
_CHATTY = ("alembic.runtime.migration", "alembic.runtime.plugins")


def _quiet_preamble() -> None:
    for name in _CHATTY:
        logger = logging.getLogger(name)
        if _PREAMBLE not in logger.filters:
            logger.addFilter(_PREAMBLE)


def alembic_config() -> Config:
    """An Alembic configuration pointing at the installed migration scripts."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(resources.files("swh_like_scheduler.sql")))
    return config


def head_revision() -> str:
    """The revision this code needs."""
    return HEAD


def scripts_head() -> str:
    """The head revision as Alembic reads it from the installed scripts."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration scripts are installed"
    return head


def current_revision(engine: sa.Engine) -> str | None:
    """The revision the database is at, ``None`` for an empty database."""
    with translated("read schema version"), engine.connect() as conn:
        if not sa.inspect(conn).has_table(_VERSION_TABLE):
            return None
        found = conn.execute(sa.text(f"SELECT version_num FROM {_VERSION_TABLE}")).scalars()
        revisions = list(found)
    if len(revisions) > 1:
        raise SchemaMismatch(
            f"the database records {len(revisions)} schema revisions ({', '.join(revisions)}); "
            "this version has one line of migrations"
        )
    return revisions[0] if revisions else None


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
    from alembic import command

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
