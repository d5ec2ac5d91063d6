"""Migrations produce exactly the schema the code declares."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import services
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from swh_like_scheduler.domain.exceptions import SchemaMismatch
from swh_like_scheduler.store import SQLAlchemyStore, make_engine, migrations
from swh_like_scheduler.store.tables import metadata

_names = itertools.count()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite'}"
        return
    server = request.getfixturevalue("postgres_server")
    name = f"swh_empty_{os.getpid()}_{next(_names)}"
    yield services.create_empty_database(server, name)
    services.drop_database(server, name)


def test_the_head_the_code_needs_is_the_newest_script() -> None:
    # the check every command makes reads HEAD, not the scripts (no Alembic)
    assert migrations.scripts_head() == migrations.HEAD


def test_the_revision_read_without_alembic_is_alembics(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        migrations.upgrade(engine, "0007")
        assert migrations.current_revision(engine) == "0007"
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == "0007"
        with pytest.raises(
            SchemaMismatch, match=f"needs {migrations.HEAD}; run `swh scheduler db upgrade`"
        ):
            migrations.check(engine)
    finally:
        engine.dispose()


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
    name = f"swh_collation_{os.getpid()}_{next(_names)}"
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


def test_0014_gives_every_listed_origin_its_row_and_holds_only_running_cooldowns(
    empty_db_url: str,
) -> None:
    """Listed origins of a database at 0013 get their statistics row (the
    listers' sums); a failure of 3 days ago is held, one of 20 days ago is
    not (its 14-day cooldown is over); statistics stay what they were."""
    from datetime import UTC, datetime, timedelta

    import sqlalchemy as sa

    engine = make_engine(empty_db_url)
    now = datetime.now(UTC).replace(microsecond=0)

    def at(days: float) -> Any:
        moment = now - timedelta(days=days)
        return moment.replace(tzinfo=None) if engine.dialect.name == "sqlite" else moment

    try:
        migrations.upgrade(engine, "0013")
        with engine.begin() as conn:
            conn.execution_options(swh_write=True)
            for lister in ("l1", "l2"):
                conn.execute(
                    sa.text(
                        "INSERT INTO lister (id, name, instance_name, current_state, created,"
                        " updated) VALUES (:id, :id, 'i', '{}', :t, :t)"
                    ),
                    {"id": lister, "t": at(50)},
                )
            listed = (
                "INSERT INTO listed_origin (lister_id, url, visit_type, extra_loader_arguments,"
            )
            listed += " enabled, first_seen, last_seen, last_update) VALUES"
            listed += " (:lister, :url, 'git', '{}', :enabled, :seen, :seen, :update)"
            for lister, url, enabled, seen, update in [
                ("l2", "https://f.example/a", True, at(40), at(1)),
                ("l1", "https://f.example/a", False, at(45), at(2)),
                ("l1", "https://f.example/b", True, at(30), None),
                ("l1", "https://f.example/c", True, at(30), None),
            ]:
                conn.execute(
                    sa.text(listed),
                    {
                        "lister": lister,
                        "url": url,
                        "enabled": enabled,
                        "seen": seen,
                        "update": update,
                    },
                )
            stats = (
                "INSERT INTO origin_visit_stats (url, visit_type, last_visit, last_visit_status,"
            )
            stats += " next_position_offset, successive_visits) VALUES (:url, 'git', :visit,"
            stats += " 'failed', 4, 1)"
            conn.execute(sa.text(stats), {"url": "https://f.example/b", "visit": at(3)})
            conn.execute(sa.text(stats), {"url": "https://f.example/c", "visit": at(20)})
        migrations.upgrade(engine)
        with engine.connect() as conn:
            rows = {
                r.url: r
                for r in conn.execute(
                    sa.text(
                        "SELECT url, enabled, lister_id, first_seen, last_update, held,"
                        " last_visit_status FROM origin_visit_stats"
                    )
                )
            }
        assert set(rows) == {f"https://f.example/{n}" for n in "abc"}
        a = rows["https://f.example/a"]
        assert (bool(a.enabled), a.lister_id, a.held) == (True, "l2", None)
        assert str(a.first_seen)[:10] == str(at(45))[:10]
        assert str(a.last_update)[:10] == str(at(1))[:10]
        assert (rows["https://f.example/b"].held, rows["https://f.example/c"].held) == (
            "failed",
            None,
        )
        assert rows["https://f.example/c"].last_visit_status == "failed"
    finally:
        engine.dispose()


def test_0018_marks_the_cooldowns_that_are_the_default(empty_db_url: str) -> None:
    """A periodic task whose cooldown is exactly the default of its period
    and expected duration has the default one (what edits went by until
    0018); any other cooldown was given. Odd microseconds and periods of
    days included: PostgreSQL computes it in SQL, SQLite row by row."""
    from datetime import UTC, datetime, timedelta

    import sqlalchemy as sa
    from alembic import command

    from swh_like_scheduler.domain.model import TaskType
    from swh_like_scheduler.intake.builders import task_from_input
    from swh_like_scheduler.policy import default_cooldown
    from swh_like_scheduler.store.tables import task as task_t

    engine = make_engine(empty_db_url)
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    odd = timedelta(days=2, seconds=3, microseconds=7)
    odd_expected = timedelta(seconds=1, microseconds=234567)
    try:
        migrations.upgrade(engine)
        store = SQLAlchemyStore(engine)
        kind = store.create_task_type(TaskType(type="t", backend_name="t"))
        values: dict[str, dict[str, Any]] = {
            "plain": {"period": "1h"},
            "expected": {"period": "1h", "expected_duration": "5m"},
            "odd": {"period": odd, "expected_duration": odd_expected},
            "given": {"period": "1h", "cooldown": "30m"},
            "given-as-default": {"period": "1h", "cooldown": "54m"},
            "zero": {"period": "1h", "cooldown": "0"},
            "oneshot": {"policy": "oneshot"},
        }
        made = store.create_tasks(
            [task_from_input({**v, "key": k}, kind, now=now) for k, v in values.items()], now=now
        )
        assert made[2].cooldown == default_cooldown(odd, odd_expected)
        config = migrations.alembic_config()
        with engine.connect() as conn:
            conn.execution_options(swh_write=True)
            config.attributes["connection"] = conn
            command.downgrade(config, "0017")
            conn.commit()
        migrations.upgrade(engine)
        with engine.connect() as conn:
            marked = dict(conn.execute(sa.select(task_t.c.key, task_t.c.cooldown_is_default)).all())
        assert {k for k, v in marked.items() if v} == {
            "plain",
            "expected",
            "odd",
            "given-as-default",  # the same value: it cannot be told apart
        }
        assert len(marked) == len(values)
    finally:
        engine.dispose()


def test_0019_adds_the_worker_task_event_window_and_drops_it_keeping_the_rows(
    empty_db_url: str,
) -> None:
    """Workers recorded at 0018 keep their rows through 0019 (no window);
    a window is then recorded; back to 0018 the window's columns go and
    the rows stay (SQLite copies the table), and up again gives exactly
    the models."""
    from datetime import UTC, datetime, timedelta

    import sqlalchemy as sa
    from alembic import command

    from swh_like_scheduler.domain.records import BlindWindow

    engine = make_engine(empty_db_url)
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    seen = now.replace(tzinfo=None) if engine.dialect.name == "sqlite" else now
    blind = {"blind_since", "blind_until", "blind_tasks"}

    def columns() -> set[str]:
        return {c["name"] for c in sa.inspect(engine).get_columns("worker")}

    def down_to_0018() -> None:
        config = migrations.alembic_config()
        with engine.connect() as conn:
            conn.execution_options(swh_write=True)
            config.attributes["connection"] = conn
            command.downgrade(config, "0018")
            conn.commit()

    try:
        migrations.upgrade(engine, "0018")
        assert not blind & columns()
        with engine.begin() as conn:
            conn.execution_options(swh_write=True)
            conn.execute(
                sa.text(
                    "INSERT INTO worker (hostname, last_heartbeat_at, online, freq, pid,"
                    " pid_since) VALUES ('w@box', :seen, :online, 2.0, 4242, :seen)"
                ),
                {"seen": seen, "online": True},
            )
        migrations.upgrade(engine)
        assert migrations.current_revision(engine) == migrations.HEAD
        assert blind <= columns()
        store = SQLAlchemyStore(engine)
        [row] = store.get_workers()
        assert (row.hostname, row.pid, row.pid_since) == ("w@box", 4242, now)
        assert (row.blind_since, row.blind_until, row.blind_tasks) == (None, None, None)
        window = BlindWindow("w@box", now + timedelta(minutes=1), now + timedelta(minutes=2))
        store.mark_blind_workers([window])
        [row] = store.get_workers()
        assert (row.blind_since, row.blind_until) == (window.since, window.until)
        down_to_0018()
        assert migrations.current_revision(engine) == "0018"
        assert not blind & columns()
        with engine.connect() as conn:
            kept = conn.execute(sa.text("SELECT hostname, pid FROM worker")).all()
        assert [tuple(r) for r in kept] == [("w@box", 4242)]
        migrations.upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            assert compare_metadata(context, metadata) == []
        [row] = SQLAlchemyStore(engine).get_workers()
        assert (row.hostname, row.blind_since, row.blind_tasks) == ("w@box", None, None)
    finally:
        engine.dispose()
