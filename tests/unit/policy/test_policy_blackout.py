"""Blackout windows: membership, leaving them, chaining, DST."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import make_task, window

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import BlackoutPeriod
from swh_like_scheduler.policy import (
    blackout_at,
    blackout_end,
    covers_whole_day,
    leave_blackouts,
    window_at,
)

PARIS = ZoneInfo("Europe/Paris")


def paris(year: int, month: int, day: int, hour: int, minute: int) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=PARIS)


def test_same_day_window_is_half_open() -> None:
    task = make_task(tz="Europe/Paris", blackout_periods=(window("12:00", "14:00"),))
    assert blackout_at(task, paris(2024, 6, 3, 11, 59)) is None
    assert blackout_at(task, paris(2024, 6, 3, 12, 0)) == window("12:00", "14:00")
    assert blackout_at(task, paris(2024, 6, 3, 13, 59)) is not None
    assert blackout_at(task, paris(2024, 6, 3, 14, 0)) is None
    assert blackout_end(task, paris(2024, 6, 3, 12, 30)) == paris(2024, 6, 3, 14, 0)
    # outside: unchanged (returned in UTC)
    outside = paris(2024, 6, 3, 15, 0)
    assert blackout_end(task, outside) == outside
    assert blackout_end(task, outside).tzinfo is UTC


def test_window_crossing_midnight() -> None:
    task = make_task(tz="Europe/Paris", blackout_periods=(window("23:00", "01:30"),))
    assert blackout_end(task, paris(2024, 6, 3, 23, 15)) == paris(2024, 6, 4, 1, 30)
    assert blackout_end(task, paris(2024, 6, 4, 0, 45)) == paris(2024, 6, 4, 1, 30)
    assert blackout_at(task, paris(2024, 6, 4, 1, 30)) is None
    assert blackout_at(task, paris(2024, 6, 3, 22, 59)) is None


def test_window_ending_at_midnight() -> None:
    for end in ("00:00", "23:59:59.999999"):  # 24:00 is parsed into time.max
        task = make_task(tz="UTC", blackout_periods=(window("22:00", end),))
        assert blackout_end(task, datetime(2024, 6, 3, 23, tzinfo=UTC)) == datetime(
            2024, 6, 4, tzinfo=UTC
        )
    assert BlackoutPeriod.parse({"start": "22:00", "end": "24:00"}).end == time.max


def test_overlapping_and_adjacent_windows_are_chained() -> None:
    periods = (window("10:00", "11:00"), window("10:30", "12:00"), window("12:00", "12:15"))
    task = make_task(tz="UTC", blackout_periods=periods)
    assert blackout_end(task, datetime(2024, 6, 3, 10, 5, tzinfo=UTC)) == datetime(
        2024, 6, 3, 12, 15, tzinfo=UTC
    )


def test_chain_across_midnight() -> None:
    periods = (window("22:00", "00:00"), window("00:00", "02:00"))
    task = make_task(tz="UTC", blackout_periods=periods)
    assert blackout_end(task, datetime(2024, 6, 3, 23, tzinfo=UTC)) == datetime(
        2024, 6, 4, 2, tzinfo=UTC
    )


def test_end_in_a_dst_gap_maps_to_the_jump() -> None:
    # 2024-03-31: 02:00 CET -> 03:00 CEST; the window ends at 02:30, which is skipped
    task = make_task(tz="Europe/Paris", blackout_periods=(window("01:00", "02:30"),))
    got = blackout_end(task, paris(2024, 3, 31, 1, 30))
    assert got == datetime(2024, 3, 31, 1, 0, tzinfo=UTC)  # 03:00 CEST
    assert blackout_at(task, got) is None


def test_window_is_read_in_local_time_across_dst() -> None:
    task = make_task(tz="Europe/Paris", blackout_periods=(window("08:00", "09:00"),))
    winter = datetime(2024, 1, 15, 7, 30, tzinfo=UTC)  # 08:30 CET
    summer = datetime(2024, 7, 15, 6, 30, tzinfo=UTC)  # 08:30 CEST
    assert blackout_end(task, winter) == datetime(2024, 1, 15, 8, 0, tzinfo=UTC)
    assert blackout_end(task, summer) == datetime(2024, 7, 15, 7, 0, tzinfo=UTC)


def test_repeated_hour_ends_in_the_same_pass() -> None:
    # 2024-10-27 03:00 CEST -> 02:00 CET; second pass of 02:10 ends at 02:30 CET
    task = make_task(tz="Europe/Paris", blackout_periods=(window("02:00", "02:30"),))
    second_pass = datetime(2024, 10, 27, 1, 10, tzinfo=UTC)
    assert blackout_end(task, second_pass) == datetime(2024, 10, 27, 1, 30, tzinfo=UTC)
    first_pass = datetime(2024, 10, 27, 0, 10, tzinfo=UTC)
    assert blackout_end(task, first_pass) == datetime(2024, 10, 27, 0, 30, tzinfo=UTC)


def test_whole_day_is_refused() -> None:
    periods = (window("00:00", "12:00"), window("11:00", "00:00"))
    assert covers_whole_day(periods)
    assert not covers_whole_day((window("00:00", "12:00"), window("12:01", "00:00")))
    with pytest.raises(InvalidInput) as caught:
        leave_blackouts(periods, "UTC", datetime(2024, 6, 3, tzinfo=UTC))
    assert caught.value.field == "blackout_periods"


ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "UTC"]
TIMES = st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 45]))


@st.composite
def windows(draw: st.DrawFn) -> tuple[BlackoutPeriod, ...]:
    count = draw(st.integers(1, 4))
    result = []
    for _ in range(count):
        start, end = draw(TIMES), draw(TIMES)
        if start != end:
            result.append(BlackoutPeriod(start, end))
    return tuple(result)


@settings(max_examples=150, deadline=None)
@given(
    periods=windows(),
    tz=st.sampled_from(ZONES),
    instant=st.datetimes(
        min_value=datetime(2024, 1, 1), max_value=datetime(2025, 1, 1), timezones=st.just(UTC)
    ),
)
def test_leaving_blackouts_lands_outside_every_window(
    periods: tuple[BlackoutPeriod, ...], tz: str, instant: datetime
) -> None:
    if not periods or covers_whole_day(periods):
        return
    result = leave_blackouts(periods, tz, instant)
    assert result >= instant
    assert window_at(periods, tz, result) is None
    if window_at(periods, tz, instant) is None:
        assert result == instant
    else:
        # never more than a day (plus a DST hour) away
        assert result - instant <= timedelta(hours=25)
