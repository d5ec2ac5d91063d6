"""The database URL says that a pooler is in the way (store/pooler.py):
``?pooler=transaction`` and PostgreSQL's own address are read and taken out
of the URL; the sessions then send no startup ``options`` and make no
prepared statement, and what ``options`` would carry is set in each
transaction instead."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.store.engine import connect_parameters, make_engine, sessions_of
from swh_like_scheduler.store.pooler import Pooler, settings_statement, split_pooler

BASE = "postgresql+psycopg://swh@pgbouncer:6432/swh"


def test_the_poolers_parameters_are_read_and_taken_out_of_the_url() -> None:
    url, pooler = split_pooler(
        sa.make_url(f"{BASE}?pooler=transaction&direct_host=db1&direct_port=5433&sslmode=require")
    )
    assert pooler == Pooler("transaction", "db1", 5433)
    assert dict(url.query) == {"sslmode": "require"}
    plain, none = split_pooler(sa.make_url(f"{BASE}?sslmode=require"))
    assert none is None and dict(plain.query) == {"sslmode": "require"}


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("pooler=statement", "pooler='statement' is not understood"),
        ("direct_host=db1", "goes with ?pooler=transaction"),
        ("pooler=transaction&direct_port=db", "direct_port='db' is not a port number"),
    ],
)
def test_a_pooler_parameter_not_understood_is_refused_by_name(query: str, said: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(said)) as info:
        make_engine(f"{BASE}?{query}")
    assert info.value.field == "db-url"


def test_sqlite_takes_no_pooler() -> None:
    with pytest.raises(InvalidInput, match="is for a PostgreSQL URL"):
        make_engine("sqlite:///x.db?pooler=transaction")


def test_behind_a_pooler_the_bounds_move_from_options_to_each_transaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGOPTIONS", "-c work_mem=8MB")
    engine = make_engine(f"{BASE}?pooler=transaction&options=-c%20lock_timeout%3D5s", role="runner")
    sessions = sessions_of(engine)
    assert sessions is not None and sessions.pooler == Pooler("transaction")
    # nothing a pooler refuses or lends to another client
    assert sessions.parameters["options"] == ""  # libpq sends neither ours nor PGOPTIONS
    assert sessions.parameters["prepare_threshold"] is None
    assert sessions.parameters["fallback_application_name"] == "swh-scheduler-runner"
    assert sessions.parameters["keepalives_idle"] == "20"  # libpq's own, client side
    # set in each transaction: the time zone, the bounds, the URL's settings
    # (which replace PGOPTIONS, as libpq does), not the server socket's
    assert sessions.per_transaction == {
        "TimeZone": "UTC",
        "lock_timeout": "5s",
        "statement_timeout": "30000ms",
        "idle_in_transaction_session_timeout": "30000ms",
    }
    assert sessions.timeout_ms("statement_timeout") == 30_000
    _, held = connect_parameters(engine)
    assert held["options"] == "" and held["prepare_threshold"] is None
    with pytest.raises(ValueError, match="no direct_host"):
        connect_parameters(engine, direct=True)
    engine.dispose()


def test_the_direct_address_gets_a_direct_sessions_parameters() -> None:
    engine = make_engine(f"{BASE}?pooler=transaction&direct_host=db1&direct_port=5432")
    _, direct = connect_parameters(engine, direct=True)
    assert (direct["host"], direct["port"], direct["dbname"]) == ("db1", 5432, "swh")
    assert "statement_timeout=30000ms" in direct["options"]
    assert "prepare_threshold" not in direct
    _, pooled = connect_parameters(engine)
    assert (pooled["host"], pooled["port"]) == ("pgbouncer", 6432)
    engine.dispose()


def test_without_a_pooler_nothing_changes() -> None:
    engine = make_engine(BASE, role="runner")
    sessions = sessions_of(engine)
    assert sessions is not None and sessions.pooler is None and not sessions.per_transaction
    assert "statement_timeout=30000ms" in sessions.parameters["options"]
    assert "prepare_threshold" not in sessions.parameters
    engine.dispose()


def test_the_settings_statement_sets_each_for_the_transaction_and_names_the_backend() -> None:
    statement, values = settings_statement({"TimeZone": "UTC", "statement_timeout": "30s"})
    assert statement == (
        "SELECT set_config(%(n0)s, %(v0)s, true), set_config(%(n1)s, %(v1)s, true), "
        "pg_backend_pid()"
    )
    assert values == {"n0": "TimeZone", "v0": "UTC", "n1": "statement_timeout", "v1": "30s"}
