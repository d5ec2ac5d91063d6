"""Edge values every interface (CLI, files, HTTP) refuses with a field name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import Task, TaskType
from swh_like_scheduler.domain.validation import parse_datetime, parse_duration, storable

NOW = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "is not a duration"),
        (float("inf"), "longer than 36,525 days"),
        (9619243134516980.0, "longer than 36,525 days"),
        ("100000 days", "longer than 36,525 days"),
        (-1, "is negative"),
    ],
)
def test_durations_are_bounded(value: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        parse_duration("period", value)  # type: ignore[arg-type]
    assert caught.value.field == "period"


def test_the_longest_duration_is_accepted() -> None:
    assert parse_duration("period", "36525 days") == timedelta(days=36_525)


@pytest.mark.parametrize(
    "text", ["9999-12-31T23:59:59-23:00", "0001-01-01T00:00:00+23:00", "9000-01-01", "1899-12-31"]
)
def test_instants_stay_inside_the_calendar(text: str) -> None:
    with pytest.raises(InvalidInput, match="outside the years 1900-8999"):
        parse_datetime("next_run", text)


def test_text_no_database_stores() -> None:
    storable("args", ["fine", {"also": ["fine"]}])
    for value in ("a\x00", ["\ud800"], {"k\x00": 1}, {"k": ["\udfff"]}):
        with pytest.raises(InvalidInput) as caught:
            storable("args", value)
        assert caught.value.field == "args"
    with pytest.raises(InvalidInput, match="NUL character") as nul:
        Task(type="t", next_run=NOW, deadline=NOW, args=("a\x00",))
    assert nul.value.field == "args"
    with pytest.raises(InvalidInput, match="lone surrogate") as surrogate:
        Task(type="t", next_run=NOW, deadline=NOW, kwargs={"x": "\ud800"})
    assert surrogate.value.field == "kwargs"
    with pytest.raises(InvalidInput, match="NUL character"):
        Task(type="t", next_run=NOW, deadline=NOW, key="k\x00")
    with pytest.raises(InvalidInput, match="NUL character"):
        TaskType(type="t", backend_name="b", description="d\x00")
    # the text of a NUL's escape is ordinary text
    assert Task(type="t", next_run=NOW, deadline=NOW, args=("\\u0000",)).args == ("\\u0000",)
