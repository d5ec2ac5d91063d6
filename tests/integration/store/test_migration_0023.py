"""Migration 0023: ``ix_listed_origin_first_visits``, the index of the policy
``first_visits_after_listing`` (issue 59), up and down on SQLite and
PostgreSQL, the listed origins kept and grabbed the same way either side."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import services
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore, make_engine, migrations
from swh_like_scheduler.store.tables import metadata
from swh_like_scheduler.visits.model import ListedOrigin
from swh_like_scheduler.visits.policy import VisitPolicy

_names = itertools.count()
NOW = datetime(2026, 12, 2, 11, tzinfo=UTC)
INDEX = "ix_listed_origin_first_visits"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite'}"
        return
    server = request.getfixturevalue("postgres_server")
    name = f"swh_first_visits_{os.getpid()}_{next(_names)}"
    yield services.create_empty_database(server, name)
    services.drop_database(server, name)


def _indexes(engine: sa.Engine) -> set[str]:
    return {str(i["name"]) for i in sa.inspect(engine).get_indexes("listed_origin")}


def _down_to_0022(engine: sa.Engine) -> None:
    config = migrations.alembic_config()
    with engine.connect() as conn:
        conn.execution_options(swh_write=True)
        config.attributes["connection"] = conn
        command.downgrade(config, "0022")
        conn.commit()


def _first_visits(store: SQLAlchemyStore, lister: str) -> list[str]:
    policy = VisitPolicy.FIRST_VISITS_AFTER_LISTING
    found = store.peek_next_visits("git", 10, policy, now=NOW, lister_id=lister)
    return [o.url.rsplit("/", 1)[1] for o in found]


def test_0023_adds_the_first_visits_index_and_drops_it(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        migrations.upgrade(engine, "0022")
        assert INDEX not in _indexes(engine)
        store = SQLAlchemyStore(engine)
        store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
        lister = str(store.get_or_create_lister("gitlab", now=NOW).id)
        dates = {"old": NOW - timedelta(days=9), "new": NOW - timedelta(days=1), "undated": None}
        store.record_listed_origins(
            [
                ListedOrigin(lister, f"https://forge.example/{k}", "git", last_update=v)
                for k, v in dates.items()
            ],
            now=NOW,
        )
        listed_before = _first_visits(store, lister)
        assert listed_before == ["old", "new", "undated"]
        migrations.upgrade(engine, "0023")
        assert migrations.current_revision(engine) == "0023"
        assert INDEX in _indexes(engine)
        assert _first_visits(store, lister) == listed_before
        _down_to_0022(engine)
        assert migrations.current_revision(engine) == "0022"
        assert INDEX not in _indexes(engine)
        assert _first_visits(store, lister) == listed_before  # the rows are kept
        migrations.upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()
