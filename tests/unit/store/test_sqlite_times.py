"""The SQLite time column's own processors write and read what SQLAlchemy's
``DateTime`` (with the UTC checks) would: same text, same instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects import sqlite

from swh_like_scheduler.store.tables_base import UTCDateTime

DIALECT = sqlite.dialect()
#: SQLAlchemy's own SQLite processors, which ours replace
REFERENCE_BIND = sa.DateTime(timezone=True).dialect_impl(DIALECT).bind_processor(DIALECT)
REFERENCE_RESULT = sa.DateTime(timezone=True).dialect_impl(DIALECT).result_processor(DIALECT, None)
OURS = UTCDateTime().dialect_impl(DIALECT)
BIND = OURS.bind_processor(DIALECT)
RESULT = OURS.result_processor(DIALECT, None)

offsets = st.integers(min_value=-23 * 60, max_value=23 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
instants = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets
)


@given(instants)
def test_the_text_is_sqlalchemys_and_reads_back_as_the_same_instant(value: datetime) -> None:
    text = BIND(value)
    assert text == REFERENCE_BIND(value.astimezone(UTC).replace(tzinfo=None))
    back = RESULT(text)
    assert back == value and back.tzinfo is UTC
    assert back == REFERENCE_RESULT(text).replace(tzinfo=UTC)


@given(instants, instants)
def test_text_order_is_time_order(a: datetime, b: datetime) -> None:
    assert (BIND(a) < BIND(b)) == (a < b)


def test_a_naive_instant_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        BIND(datetime(2026, 1, 1))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-12-03 10:00:00", datetime(2026, 12, 3, 10, tzinfo=UTC)),  # CURRENT_TIMESTAMP
        ("2026-12-03 10:00:00.5", datetime(2026, 12, 3, 10, 0, 0, 500000, tzinfo=UTC)),
        ("2026-12-03 12:00:00+02:00", datetime(2026, 12, 3, 10, tzinfo=UTC)),
        (None, None),
    ],
)
def test_other_texts_sqlite_may_hold_are_read(text: str | None, expected: datetime | None) -> None:
    assert RESULT(text) == expected


def test_nulls_pass_through_both_ways() -> None:
    assert BIND(None) is None and RESULT(None) is None
