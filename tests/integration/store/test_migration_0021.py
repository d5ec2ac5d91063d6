"""Migration 0021: ``lease_terms``, the monitor's steal settings published
for the workers' self-fencing bound, up and down on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import services
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from swh_like_scheduler.store import SQLAlchemyStore, make_engine, migrations
from swh_like_scheduler.store.tables import metadata

_names = itertools.count()
S = timedelta(seconds=1)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite'}"
        return
    server = request.getfixturevalue("postgres_server")
    name = f"swh_terms_{os.getpid()}_{next(_names)}"
    yield services.create_empty_database(server, name)
    services.drop_database(server, name)


def test_0021_adds_the_lease_terms_and_drops_them(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)

    def tables() -> set[str]:
        return set(sa.inspect(engine).get_table_names())

    def down_to_0020() -> None:
        config = migrations.alembic_config()
        with engine.connect() as conn:
            conn.execution_options(swh_write=True)
            config.attributes["connection"] = conn
            command.downgrade(config, "0020")
            conn.commit()

    try:
        migrations.upgrade(engine, "0020")
        assert "lease_terms" not in tables()
        migrations.upgrade(engine)
        assert migrations.current_revision(engine) == migrations.HEAD
        store = SQLAlchemyStore(engine)
        assert store.lease_terms() is None
        published = store.publish_lease_terms(ping_timeout=30 * S, grace=30 * S, holder="m")
        assert store.lease_terms() == published
        down_to_0020()
        assert migrations.current_revision(engine) == "0020"
        assert "lease_terms" not in tables()
        migrations.upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            assert compare_metadata(context, metadata) == []
        assert SQLAlchemyStore(engine).lease_terms() is None  # the table is new again
    finally:
        engine.dispose()
