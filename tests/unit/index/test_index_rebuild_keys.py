"""The rebuild's cursors and pages as Redis holds them: text and back,
exactly, and the cursor after a page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from swh_like_scheduler.index.rebuild import END, Cursor, Page, next_cursor
from swh_like_scheduler.store.values import WaitingEntry

instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
keys = st.tuples(instants, st.integers(min_value=1, max_value=2**62))


@given(rank=st.integers(0, 2), after=st.none() | keys, until=keys)
def test_cursors_and_pages_read_back_as_written(
    rank: int, after: tuple[datetime, int] | None, until: tuple[datetime, int]
) -> None:
    assert Cursor.parse(Cursor(rank, after).text()) == Cursor(rank, after)
    assert Page.parse(Page(rank, after, until).text()) == Page(rank, after, until)


def test_the_cursor_after_a_page() -> None:
    t = datetime(2026, 5, 1, tzinfo=UTC)
    page = [WaitingEntry(n, t, t + timedelta(seconds=n)) for n in (1, 2, 3)]
    # a full page: on in the class, after its last key
    assert next_cursor(Cursor(1), page, 3) == Cursor(1, (t + timedelta(seconds=3), 3)).text()
    # a short page ends the class: the next one from its start, then the end
    assert next_cursor(Cursor(0), page, 10) == Cursor(1).text()
    assert next_cursor(Cursor(2, page[0].key), [], 10) == END
