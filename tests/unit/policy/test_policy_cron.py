"""Cron firings in IANA zones, across DST changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.policy import (
    cron_times,
    is_real_wall_time,
    local_to_utc,
    next_cron_time,
    shortest_cron_gap,
)
from swh_like_scheduler.policy.retry import check_retry_budget


def local(instant: datetime, tz: str) -> str:
    return instant.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M%z")


def firings(expr: str, tz: str, after: datetime, count: int) -> list[str]:
    return [local(t, tz) for t in islice(cron_times(expr, tz, after), count)]


def test_next_cron_time_is_utc_and_strictly_after() -> None:
    after = datetime(2024, 6, 3, 3, 0, tzinfo=UTC)
    first = next_cron_time("0 3 * * *", "UTC", after)
    assert first == datetime(2024, 6, 4, 3, 0, tzinfo=UTC)
    assert first.utcoffset() == timedelta(0)
    # an aware `after` in another zone is the same instant
    paris_after = after.astimezone(ZoneInfo("Europe/Paris"))
    assert next_cron_time("0 3 * * *", "UTC", paris_after) == first


def test_cron_reads_the_expression_in_the_task_zone() -> None:
    after = datetime(2024, 6, 3, 0, 0, tzinfo=UTC)
    # 03:00 in Paris (CEST, +02:00) is 01:00 UTC
    assert next_cron_time("0 3 * * *", "Europe/Paris", after) == datetime(
        2024, 6, 3, 1, 0, tzinfo=UTC
    )


class TestParis:
    def test_skipped_time_fires_once_at_the_jump(self) -> None:
        # 2024-03-31 02:00 CET -> 03:00 CEST: 02:30 does not exist that day
        got = firings("30 2 * * *", "Europe/Paris", datetime(2024, 3, 29, 12, tzinfo=UTC), 4)
        assert got == [
            "2024-03-30 02:30+0100",
            "2024-03-31 03:00+0200",
            "2024-04-01 02:30+0200",
            "2024-04-02 02:30+0200",
        ]

    def test_several_skipped_matches_collapse_into_one_firing(self) -> None:
        got = firings("*/30 * * * *", "Europe/Paris", datetime(2024, 3, 31, 0, 0, tzinfo=UTC), 4)
        # 02:00 and 02:30 are skipped; 03:00 (the jump) fires once
        assert got == [
            "2024-03-31 01:30+0100",
            "2024-03-31 03:00+0200",
            "2024-03-31 03:30+0200",
            "2024-03-31 04:00+0200",
        ]

    def test_repeated_time_fires_once(self) -> None:
        # 2024-10-27 03:00 CEST -> 02:00 CET: 02:30 happens twice
        got = firings("30 2 * * *", "Europe/Paris", datetime(2024, 10, 25, 12, tzinfo=UTC), 3)
        assert got == ["2024-10-26 02:30+0200", "2024-10-27 02:30+0200", "2024-10-28 02:30+0100"]

    def test_hourly_job_does_not_repeat_the_repeated_hour(self) -> None:
        got = firings("0 * * * *", "Europe/Paris", datetime(2024, 10, 26, 23, 30, tzinfo=UTC), 3)
        assert got == ["2024-10-27 02:00+0200", "2024-10-27 03:00+0100", "2024-10-27 04:00+0100"]

    def test_after_inside_the_second_pass_of_the_repeated_hour(self) -> None:
        after = datetime(2024, 10, 27, 1, 10, tzinfo=UTC)  # 02:10 CET, second pass
        assert local(next_cron_time("30 2 * * *", "Europe/Paris", after), "Europe/Paris") == (
            "2024-10-28 02:30+0100"
        )


class TestNewYork:
    def test_spring_forward(self) -> None:
        got = firings("0 2 * * *", "America/New_York", datetime(2024, 3, 8, 12, tzinfo=UTC), 3)
        assert got == ["2024-03-09 02:00-0500", "2024-03-10 03:00-0400", "2024-03-11 02:00-0400"]

    def test_fall_back(self) -> None:
        got = firings("30 1 * * *", "America/New_York", datetime(2024, 11, 1, 12, tzinfo=UTC), 3)
        assert got == ["2024-11-02 01:30-0400", "2024-11-03 01:30-0400", "2024-11-04 01:30-0500"]


class TestLordHowe:
    """Australia/Lord_Howe shifts by 30 minutes."""

    def test_spring_forward_half_hour(self) -> None:
        # 2024-10-06 02:00 +10:30 -> 02:30 +11:00
        got = firings("15 2 * * *", "Australia/Lord_Howe", datetime(2024, 10, 4, 12, tzinfo=UTC), 3)
        assert got == ["2024-10-05 02:15+1030", "2024-10-06 02:30+1100", "2024-10-07 02:15+1100"]

    def test_fall_back_half_hour(self) -> None:
        # 2024-04-07 02:00 +11:00 -> 01:30 +10:30: 01:45 happens twice
        got = firings("45 1 * * *", "Australia/Lord_Howe", datetime(2024, 4, 5, 0, tzinfo=UTC), 3)
        assert got == ["2024-04-06 01:45+1100", "2024-04-07 01:45+1100", "2024-04-08 01:45+1030"]


class TestChatham:
    def test_spring_forward(self) -> None:
        # 2024-09-29 02:45 +12:45 -> 03:45 +13:45
        got = firings("0 3 * * *", "Pacific/Chatham", datetime(2024, 9, 27, 12, tzinfo=UTC), 3)
        assert got == ["2024-09-28 03:00+1245", "2024-09-29 03:45+1345", "2024-09-30 03:00+1345"]

    def test_fall_back(self) -> None:
        # 2024-04-07 03:45 +13:45 -> 02:45 +12:45: 03:00 happens twice
        got = firings("0 3 * * *", "Pacific/Chatham", datetime(2024, 4, 5, 12, tzinfo=UTC), 3)
        assert got == ["2024-04-06 03:00+1345", "2024-04-07 03:00+1345", "2024-04-08 03:00+1245"]


def test_local_to_utc_rules() -> None:
    paris = "Europe/Paris"
    # skipped wall time -> the instant of the jump
    assert local_to_utc(datetime(2024, 3, 31, 2, 30), paris) == datetime(
        2024, 3, 31, 1, 0, tzinfo=UTC
    )
    # ambiguous -> first occurrence, or the second when it must be after a given instant
    ambiguous = datetime(2024, 10, 27, 2, 30)
    first = datetime(2024, 10, 27, 0, 30, tzinfo=UTC)
    assert local_to_utc(ambiguous, paris) == first
    assert local_to_utc(ambiguous, paris, after=first) == first + timedelta(hours=1)
    assert not is_real_wall_time(datetime(2024, 3, 31, 2, 30), paris)
    assert is_real_wall_time(ambiguous, paris)


def test_never_firing_expression_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        next_cron_time("0 0 30 2 *", "UTC", datetime(2024, 1, 1, tzinfo=UTC))
    assert caught.value.field == "cron"


def test_shortest_gap() -> None:
    start = datetime(2024, 6, 3, tzinfo=UTC)
    assert shortest_cron_gap("0 9 * * 1-5", "UTC", start) == timedelta(days=1)
    assert shortest_cron_gap("0 */6 * * *", "UTC", start) == timedelta(hours=6)
    assert shortest_cron_gap("0 0,1 * * *", "UTC", start) == timedelta(hours=1)


ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "UTC"]
EXPRESSIONS = [
    "0 3 * * *",
    "30 2 * * *",
    "15 2 * * *",
    "45 1 * * *",
    "*/20 * * * *",
    "0 * * * *",
    "0 0 * * 0",
    "30 1,2,3 * * *",
]
# instants in 2024, dense around DST changes is not needed: 64 firings per example
INSTANTS = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2025, 1, 1), timezones=st.just(UTC)
)


@settings(max_examples=60, deadline=None)
@given(expr=st.sampled_from(EXPRESSIONS), tz=st.sampled_from(ZONES), after=INSTANTS)
def test_firings_strictly_increase_and_are_real_local_times(
    expr: str, tz: str, after: datetime
) -> None:
    zone = ZoneInfo(tz)
    previous = after
    for instant in islice(cron_times(expr, tz, after), 40):
        assert instant > previous
        assert instant.utcoffset() == timedelta(0)
        wall = instant.astimezone(zone).replace(tzinfo=None)
        assert is_real_wall_time(wall, tz)
        # round trip: the wall time maps back to the same instant, its first occurrence
        assert local_to_utc(wall, tz) == instant
        previous = instant


# Instants just before each DST change of the test zones in 2024.
DST_EDGES = [
    datetime(2024, 3, 30, tzinfo=UTC),
    datetime(2024, 10, 26, tzinfo=UTC),
    datetime(2024, 3, 9, tzinfo=UTC),
    datetime(2024, 11, 2, tzinfo=UTC),
    datetime(2024, 4, 5, tzinfo=UTC),
    datetime(2024, 10, 4, tzinfo=UTC),
    datetime(2024, 9, 27, tzinfo=UTC),
]


@settings(max_examples=60, deadline=None)
@given(
    hour=st.integers(0, 23),
    minute=st.sampled_from([0, 15, 30, 45]),
    tz=st.sampled_from(ZONES),
    edge=st.sampled_from(DST_EDGES),
)
def test_daily_job_fires_exactly_once_per_local_day(
    hour: int, minute: int, tz: str, edge: datetime
) -> None:
    zone = ZoneInfo(tz)
    instants = list(islice(cron_times(f"{minute} {hour} * * *", tz, edge), 6))
    days = [t.astimezone(zone).date() for t in instants]
    assert len(set(days)) == len(days)  # never twice on a day
    for a, b in pairwise(days):
        assert (b - a).days == 1  # never skips a day


def brute_shortest_gap(expr: str, tz: str, after: datetime) -> timedelta:
    """Every consecutive pair of firings over the year after ``after``."""
    end = after + timedelta(days=366)
    times = cron_times(expr, tz, after)
    previous, shortest = next(times), timedelta.max
    for current in times:
        shortest = min(shortest, current - previous)
        if current > end:
            return shortest
        previous = current
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("expr", "tz", "expected"),
    [
        # the spring-forward night, nine months ahead: 02:30 is skipped and
        # fires at 03:00, half an hour before 03:30
        ("30 2,3 * * *", "Europe/Paris", timedelta(minutes=30)),
        # 01:00 CET to 03:00 CEST that night is one hour, not two
        ("0 1,3 * * *", "Europe/Paris", timedelta(hours=1)),
        ("0 1,3 * * *", "UTC", timedelta(hours=2)),
        # a half-hour DST shift
        ("0 1,3 * * *", "Australia/Lord_Howe", timedelta(hours=1, minutes=30)),
        ("0 9 * * 1-5", "America/New_York", timedelta(days=1)),
    ],
)
def test_shortest_gap_covers_a_year_of_dst_changes(expr: str, tz: str, expected: timedelta) -> None:
    june = datetime(2026, 6, 15, 12, tzinfo=UTC)
    assert shortest_cron_gap(expr, tz, june) == expected
    assert brute_shortest_gap(expr, tz, june) == expected


@pytest.mark.parametrize("expr", ["30 1,2,3 * * *", "0 0 * * 0", "*/45 1-3 * * *"])
@pytest.mark.parametrize("tz", ["Europe/Paris", "Australia/Lord_Howe", "America/Santiago"])
def test_shortest_gap_is_the_brute_force_one(expr: str, tz: str) -> None:
    after = datetime(2026, 2, 1, 7, tzinfo=UTC)
    assert shortest_cron_gap(expr, tz, after) == brute_shortest_gap(expr, tz, after)


def test_the_retry_check_sees_a_dst_night_months_away() -> None:
    """Two retries of 10 and 30 minutes do not fit the 30-minute gap of the
    spring-forward night, checked in June."""
    task_type = TaskType(
        type="t",
        backend_name="t",
        num_retries=2,
        retry_delay=timedelta(minutes=10),
        retry_growth=3.0,
    )
    june = datetime(2026, 6, 15, 12, tzinfo=UTC)
    task = Task(
        type="t",
        schedule_kind=ScheduleKind.CRON,
        cron="30 2,3 * * *",
        cron_max_duration=timedelta(minutes=20),
        tz="Europe/Paris",
        next_run=june,
        deadline=june,
        created_at=june,
    )
    with pytest.raises(InvalidInput) as raised:
        check_retry_budget(task, task_type)
    assert raised.value.field == "cron"
    assert "30m" in str(raised.value) and "40m" in str(raised.value)
