"""Migrations produce exactly the schema the code declares."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import services
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from swh_like_scheduler import migrations
from swh_like_scheduler.exceptions import SchemaMismatch
from swh_like_scheduler.store import SQLAlchemyStore, make_engine
from swh_like_scheduler.store.tables import metadata

_names = itertools.count()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite'}"
        return
    server = request.getfixturevalue("postgres_server")
    name = f"swh_empty_{next(_names)}"
    yield services.create_empty_database(server, name)
    services.drop_database(server, name)


def test_upgrade_of_an_empty_database_gives_exactly_the_models(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        assert migrations.current_revision(engine) is None
        migrations.upgrade(engine)
        assert migrations.current_revision(engine) == migrations.head_revision()
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            assert compare_metadata(context, metadata) == []
        migrations.upgrade(engine)  # a second upgrade is a no-op
        migrations.check(engine)
    finally:
        engine.dispose()


def test_an_uninitialised_database_is_reported(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        with pytest.raises(SchemaMismatch, match="swh scheduler db init"):
            migrations.check(engine)
        store = SQLAlchemyStore(engine)
        with pytest.raises(SchemaMismatch, match="db init"):
            store.get_task_types()
    finally:
        engine.dispose()


def test_downgrade_then_upgrade(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        migrations.upgrade(engine)
        migrations.upgrade(engine, "head")
        from alembic import command

        config = migrations.alembic_config()
        with engine.connect() as conn:
            conn.execution_options(swh_write=True)
            config.attributes["connection"] = conn
            command.downgrade(config, "base")
            conn.commit()
        assert migrations.current_revision(engine) is None
        migrations.upgrade(engine)
        assert migrations.is_current(engine)
    finally:
        engine.dispose()


@pytest.mark.postgresql
def test_digests_compare_bytewise_on_postgresql(postgres_server: str) -> None:
    """Alembic does not compare collations: check the one 0004 sets."""
    name = f"swh_collation_{next(_names)}"
    url = services.create_empty_database(postgres_server, name)
    engine = make_engine(url)
    try:
        migrations.upgrade(engine)
        with engine.connect() as conn:
            found = dict(
                conn.exec_driver_sql(
                    "SELECT table_name || '.' || column_name, collation_name"
                    " FROM information_schema.columns"
                    " WHERE column_name IN ('arguments_hash', 'backend_id', 'key')"
                ).all()
            )
        assert found == {"task.arguments_hash": "C", "task_run.backend_id": "C", "task.key": None}
    finally:
        engine.dispose()
        services.drop_database(postgres_server, name)
