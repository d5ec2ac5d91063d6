"""A value the database refuses is the caller's mistake at the store's
boundary (store/errors.py), never an outage (issue 60): a number past its
column's range, text that is no number, more parameters or a deeper
expression than one statement takes, an integer sqlite3 cannot bind. The
causes that are outages stay outages."""

from __future__ import annotations

import sqlite3

import psycopg
import psycopg.errors as pg_errors
import pytest
import sqlalchemy.exc as sa_exc

from swh_like_scheduler.domain.exceptions import InvalidInput, StoreUnavailable
from swh_like_scheduler.store.errors import translate, translated

WHERE = "search tasks"


def wrapped(error: Exception) -> sa_exc.SQLAlchemyError:
    base = psycopg.Error if isinstance(error, psycopg.Error) else sqlite3.Error
    found = sa_exc.DBAPIError.instance("SELECT 1", {}, error, base)
    assert isinstance(found, sa_exc.SQLAlchemyError)
    return found


@pytest.mark.parametrize(
    "error",
    [
        pg_errors.NumericValueOutOfRange("bigint out of range"),
        pg_errors.InvalidTextRepresentation("invalid input syntax for type json"),
        pg_errors.InvalidRowCountInLimitClause("LIMIT must not be negative"),
        psycopg.OperationalError(
            "sending query and params failed: number of parameters must be between 0 and 65535"
        ),
        sqlite3.OperationalError("too many SQL variables"),
        sqlite3.OperationalError("Expression tree is too large (maximum depth 1000)"),
    ],
)
def test_a_value_the_database_refuses_is_invalid_input(error: Exception) -> None:
    found = translate(wrapped(error), WHERE)
    assert type(found) is InvalidInput
    assert found.field == "arguments"
    assert str(found).startswith(f"arguments: {WHERE}: ")
    assert "cannot reach" not in str(found)


def test_an_integer_sqlite3_cannot_bind_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as refused, translated(WHERE):
        raise OverflowError("Python int too large to convert to SQLite INTEGER")
    assert "a number too large for the database" in str(refused.value)


def test_an_outage_is_still_one() -> None:
    found = translate(wrapped(psycopg.OperationalError("connection refused")), WHERE)
    assert isinstance(found, StoreUnavailable)
    setting = translate(
        wrapped(pg_errors.InvalidParameterValue('invalid value for parameter "TimeZone"')), WHERE
    )
    assert type(setting) is InvalidInput and setting.field == "db-url"
