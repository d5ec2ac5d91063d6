"""The PostgreSQL time column's result processor: what the driver gives in
UTC is handed back as it is, anything else as the same instant in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects.postgresql import psycopg

from swh_like_scheduler.store.tables_base import UTCDateTime

DIALECT = psycopg.dialect()
OURS = UTCDateTime().dialect_impl(DIALECT)
RESULT = OURS.result_processor(DIALECT, None)

offsets = st.integers(min_value=-23 * 60, max_value=23 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
instants = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets
)


def test_a_utc_value_is_the_same_object_and_none_stays_none() -> None:
    value = datetime(2026, 12, 3, 16, 5, 1, 123456, tzinfo=UTC)
    assert RESULT(value) is value
    assert RESULT(None) is None


@given(instants)
def test_any_other_zone_reads_as_the_same_instant_in_utc(value: datetime) -> None:
    read = RESULT(value)
    assert read == value
    assert read.tzinfo is UTC
    assert read.utcoffset() == timedelta(0)


def test_a_naive_value_is_taken_as_utc() -> None:
    read = RESULT(datetime(2026, 12, 3, 16, 5))
    assert read == datetime(2026, 12, 3, 16, 5, tzinfo=UTC)
    assert read.tzinfo is UTC
