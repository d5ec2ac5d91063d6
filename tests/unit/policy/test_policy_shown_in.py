"""One clock per output (issue 57): while a reader's zone is set
(:func:`~swh_like_scheduler.policy.times.shown_in`), every instant the
policy writes in its sentences is in that zone; outside it they are as
before (UTC in ISO 8601; a condition's instants in the task's own zone)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from policy_helpers import make_type

from swh_like_scheduler.domain.model import BlackoutPeriod, ScheduleKind, Task
from swh_like_scheduler.policy import condition, explain
from swh_like_scheduler.policy.times import fmt_instant, fmt_local, reader_zone, shown_in

H = timedelta(hours=1)
NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)  # winter: Paris is +01:00
PARIS = ZoneInfo("Europe/Paris")
OFFSET = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?([+-]\d\d:\d\d)")


def cron_in_paris() -> Task:
    return Task(
        type="sleep",
        schedule_kind=ScheduleKind.CRON,
        cron="0 3 * * *",
        cron_max_duration=4 * H,
        tz="Europe/Paris",
        next_run=NOW - 33 * H,
        deadline=NOW - 29 * H,
        last_good_start_at=NOW - 57 * H,
        blackout_periods=(BlackoutPeriod.parse({"start": "13:00", "end": "15:30"}),),
    )


def test_outside_a_reader_zone_nothing_changes() -> None:
    assert reader_zone() is None
    assert fmt_instant(NOW) == "2026-01-15T12:00:00+00:00"
    assert fmt_local(NOW, "Europe/Paris") == "2026-01-15 13:00+01:00"


def test_inside_it_every_instant_is_in_that_zone_and_then_not() -> None:
    with shown_in(PARIS):
        assert reader_zone() is PARIS
        assert fmt_instant(NOW) == "2026-01-15 13:00:00+01:00"
        assert fmt_local(NOW, "Asia/Tokyo") == "2026-01-15 13:00:00+01:00"
        with shown_in(UTC):
            assert fmt_instant(NOW) == "2026-01-15 12:00:00+00:00"
        assert fmt_instant(NOW) == "2026-01-15 13:00:00+01:00"
    assert reader_zone() is None


def test_an_explanation_of_a_paris_task_has_one_offset_in_a_reader_zone() -> None:
    task = cron_in_paris()
    before = "\n".join(explain(task, make_type(), NOW).lines())
    assert OFFSET.findall(before) and set(OFFSET.findall(before)) == {"+00:00", "+01:00"}
    with shown_in(UTC):
        text = "\n".join(explain(task, make_type(), NOW).lines())
    assert set(OFFSET.findall(text)) == {"+00:00"}, text
    assert "Earliest start:  2026-01-14 03:00:00+00:00" in text
    assert "Latest start:    2026-01-14 06:00:00+00:00" in text
    # the condition's own sentence, computed in the zone too
    with shown_in(PARIS):
        detail = condition(task, make_type(), NOW).detail
    assert set(OFFSET.findall(detail)) == {"+01:00"}


def test_a_blackout_says_its_wall_clock_in_the_task_zone_apart_from_instants() -> None:
    task = Task(
        type="sleep",
        schedule_kind=ScheduleKind.ADAPTIVE,
        current_interval=H,
        next_run=NOW - H,
        deadline=NOW,
        blackout_periods=(BlackoutPeriod.parse({"start": "12:30", "end": "14:00"}),),
        tz="Europe/Paris",
    )
    with shown_in(UTC):
        [moved] = explain(task, make_type(), NOW).adjustments
    assert moved.detail == (
        "now (13:00 in Europe/Paris) falls in the blackout window 12:30:00-14:00:00 there; "
        "it may start when the blackout ends at 2026-01-15 13:00:00+00:00"
    )
