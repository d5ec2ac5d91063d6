"""Migration 0022: ``origin_metrics.origins_never_attempted`` (issue 59), up
and down on SQLite and PostgreSQL, the metrics stored before kept."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from datetime import UTC, datetime
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
from swh_like_scheduler.visits.feedback import VisitStatusMessage
from swh_like_scheduler.visits.model import ListedOrigin, VisitStatus

_names = itertools.count()
NOW = datetime(2026, 12, 2, 7, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite'}"
        return
    server = request.getfixturevalue("postgres_server")
    name = f"swh_metrics_{os.getpid()}_{next(_names)}"
    yield services.create_empty_database(server, name)
    services.drop_database(server, name)


def _columns(engine: sa.Engine) -> set[str]:
    return {c["name"] for c in sa.inspect(engine).get_columns("origin_metrics")}


def _down_to_0021(engine: sa.Engine) -> None:
    config = migrations.alembic_config()
    with engine.connect() as conn:
        conn.execution_options(swh_write=True)
        config.attributes["connection"] = conn
        command.downgrade(config, "0021")
        conn.commit()


def test_0022_adds_the_never_attempted_count_and_drops_it(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        migrations.upgrade(engine, "0021")
        assert "origins_never_attempted" not in _columns(engine)
        with engine.begin() as conn:  # a row of counts stored before
            conn.execute(
                sa.text(
                    "INSERT INTO lister (id, name, instance_name, current_state, created, updated)"
                    " VALUES ('l1', 'gitlab', '', '{}', :t, :t)"
                ),
                {"t": NOW},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO origin_metrics (lister_id, visit_type, last_update,"
                    " origins_known, origins_enabled, origins_never_visited,"
                    " origins_with_pending_changes, origins_ok, origins_warning, origins_error)"
                    " VALUES ('l1', 'git', :t, 5, 4, 3, 0, 1, 2, 1)"
                ),
                {"t": NOW},
            )
        migrations.upgrade(engine)
        assert migrations.current_revision(engine) == migrations.HEAD
        store = SQLAlchemyStore(engine)
        [kept] = store.get_metrics()
        assert (kept.origins_known, kept.origins_never_visited) == (5, 3)
        assert kept.origins_never_attempted == 0  # until counted again
        # counted: one origin failed, one never visited
        store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
        urls = ["https://forge.example/a", "https://forge.example/b"]
        store.record_listed_origins([ListedOrigin("l1", u, "git") for u in urls], now=NOW)
        store.record_visit_statuses([VisitStatusMessage(urls[0], "git", NOW, VisitStatus.FAILED)])
        [counted] = store.update_metrics(now=NOW)
        assert (counted.origins_never_visited, counted.origins_never_attempted) == (2, 1)
        _down_to_0021(engine)
        assert migrations.current_revision(engine) == "0021"
        assert "origins_never_attempted" not in _columns(engine)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT origins_never_visited FROM origin_metrics")).all()
        migrations.upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()
