"""Contract: the forecasts recorded (what every API replica reports), the
latest few kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _body(n: int) -> dict[str, Any]:
    return {"now": (T0 + n * timedelta(minutes=15)).isoformat(), "base": {"workers": {"q": n}}}


def test_the_latest_forecast_is_read_back_and_the_oldest_go(store: Any) -> None:
    assert store.latest_forecast() is None
    first = store.record_forecast(_body(0), at=T0, took=1.5, keep=2)
    latest = store.latest_forecast()
    assert latest == first and latest.body == _body(0) and latest.took == 1.5
    assert latest.at == T0
    for n in (1, 2):
        store.record_forecast(_body(n), at=T0 + n * timedelta(minutes=15), took=2.0, keep=2)
    latest = store.latest_forecast()
    assert latest.body["base"]["workers"] == {"q": 2} and latest.id > first.id
    # a smaller keep drops all but the newest
    store.record_forecast(_body(3), at=T0 + timedelta(hours=1), took=0.0, keep=1)
    assert store.latest_forecast().body == _body(3)


@pytest.mark.parametrize(
    ("at", "took", "keep", "field"),
    [
        (datetime(2026, 12, 2), 1.0, 2, "at|UTC offset"),
        (T0, -1.0, 2, "took"),
        (T0, float("nan"), 2, "took"),
        (T0, 1.0, 0, "keep"),
    ],
)
def test_bad_records_are_refused_and_nothing_is_written(
    store: Any, at: datetime, took: float, keep: int, field: str
) -> None:
    with pytest.raises(InvalidInput, match=field):
        store.record_forecast(_body(0), at=at, took=took, keep=keep)
    assert store.latest_forecast() is None


def test_the_recorded_forecasts_come_latest_first(store: Any) -> None:
    assert store.recorded_forecasts() == []
    for n in range(3):
        store.record_forecast(_body(n), at=T0 + n * timedelta(minutes=15), took=1.0)
    found = store.recorded_forecasts(limit=2)
    assert [f.body for f in found] == [_body(2), _body(1)]
    assert [f.body for f in store.recorded_forecasts()] == [_body(2), _body(1), _body(0)]
    for limit in (0, 1001):
        with pytest.raises(InvalidInput, match="limit"):
            store.recorded_forecasts(limit=limit)
    with pytest.raises(InvalidInput, match="keep"):
        store.record_forecast(_body(9), at=T0, took=1.0, keep=1001)
