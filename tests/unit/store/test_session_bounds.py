"""The bounds each PostgreSQL session is opened with (store/session.py): what
is added to the user's URL, what the user wrote winning, mistyped values
refused by name."""

from __future__ import annotations

from datetime import timedelta

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.store.session import (
    SessionBounds,
    bounded_parameters,
    duration_ms,
    effective_timeout,
    named_settings,
)

URL_PARAMETERS = {"host": "db.example", "dbname": "swh", "user": "swh"}


def test_a_daemon_session_gets_every_bound_on_both_ends() -> None:
    merged = bounded_parameters(URL_PARAMETERS, SessionBounds.for_role("runner"), {})
    assert merged["host"] == "db.example"
    assert merged["fallback_application_name"] == "swh-scheduler-runner"
    assert merged["keepalives"] == "1"
    assert (merged["keepalives_idle"], merged["keepalives_interval"]) == ("20", "5")
    assert (merged["keepalives_count"], merged["tcp_user_timeout"]) == ("3", "30000")
    assert merged["connect_timeout"] == "10"
    assert named_settings(merged["options"]) == {
        "statement_timeout": "30000ms",
        "idle_in_transaction_session_timeout": "30000ms",
        "tcp_keepalives_idle": "20",
        "tcp_keepalives_interval": "5",
        "tcp_keepalives_count": "3",
        "tcp_user_timeout": "30000ms",
    }


def test_a_command_has_no_statement_timeout_and_a_long_idle_bound() -> None:
    merged = bounded_parameters(URL_PARAMETERS, SessionBounds.for_role("cli"), {})
    assert merged["fallback_application_name"] == "swh-scheduler-cli"
    assert effective_timeout(merged, "statement_timeout") == 0
    assert effective_timeout(merged, "idle_in_transaction_session_timeout") == 600_000


def test_what_the_url_says_wins() -> None:
    given = {
        **URL_PARAMETERS,
        "keepalives_idle": "60",
        "application_name": "mine",
        "options": r"-c statement_timeout=2min --search-path=a\ b",
    }
    merged = bounded_parameters(given, SessionBounds(), {})
    assert merged["keepalives_idle"] == "60"
    assert merged["application_name"] == "mine"
    options = named_settings(merged["options"])
    assert options["statement_timeout"] == "2min"  # kept, not added twice
    assert options["search_path"] == "a b"
    assert options["idle_in_transaction_session_timeout"] == "30000ms"
    assert merged["options"].startswith(r"-c statement_timeout=2min --search-path=a\ b ")
    assert effective_timeout(merged, "statement_timeout") == 120_000


def test_libpq_environment_counts_as_given() -> None:
    environ = {"PGOPTIONS": "-cidle_in_transaction_session_timeout=5s", "PGAPPNAME": "ops"}
    merged = bounded_parameters(URL_PARAMETERS, SessionBounds(), environ)
    # libpq would use PGAPPNAME; the URL's options replace PGOPTIONS whole,
    # so its settings are carried into them
    assert "fallback_application_name" not in merged
    options = named_settings(merged["options"])
    assert options["idle_in_transaction_session_timeout"] == "5s"
    assert options["statement_timeout"] == "30000ms"


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"keepalives_idle": "thirty"}, "keepalives_idle"),
        ({"tcp_user_timeout": "-1"}, "tcp_user_timeout"),
        ({"options": "-c statement_timeout=6o"}, "statement_timeout"),
        ({"options": "-c idle_in_transaction_session_timeout=5parsecs"}, "idle_in_transaction"),
        ({"options": "-c tcp_keepalives_count=3s"}, "tcp_keepalives_count"),
    ],
)
def test_a_mistyped_value_is_refused_by_name(given: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        bounded_parameters({**URL_PARAMETERS, **given}, SessionBounds(), {})
    assert refused.value.field == "db-url"
    assert named in refused.value.message


def test_durations_read_as_postgresql_reads_them() -> None:
    assert duration_ms("statement_timeout", "1500") == 1500
    assert duration_ms("statement_timeout", "2s") == 2000
    assert duration_ms("statement_timeout", "'5min'") == 300_000
    assert duration_ms("tcp_keepalives_idle", "30") == 30_000
    assert duration_ms("statement_timeout", "0") == 0


def test_no_bound_is_written_as_zero() -> None:
    bounds = SessionBounds(statement_timeout=None, idle_in_transaction_timeout=timedelta(0))
    settings = bounds.server_settings()
    assert settings["statement_timeout"] == "0ms"
    assert settings["idle_in_transaction_session_timeout"] == "0ms"


def test_an_unknown_role_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="role"):
        SessionBounds.for_role("runer")
