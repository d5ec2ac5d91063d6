"""Translating a Celery ``beat_schedule`` into our schedule kinds (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from celery.schedules import crontab, schedule, solar

from swh_like_scheduler.beat.schedule import (
    app_entries,
    app_time_zone,
    celery_route,
    cooldown_for,
    cron_of,
    translate_entry,
    translate_schedule,
)
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind
from swh_like_scheduler.policy.cron import next_cron_time


def to_default(task: str, options: Mapping[str, Any]) -> str:
    return str(options.get("queue", "celery"))


def entry(name: str = "e", **fields: Any) -> Any:
    return translate_entry(name, {"task": "proj.add", **fields}, tz="UTC", route=to_default)


@pytest.mark.parametrize(
    ("fields", "cron"),
    [
        ({}, "* * * * *"),
        ({"minute": 0, "hour": 3}, "0 3 * * *"),
        ({"minute": "*/15", "hour": "9-17", "day_of_week": "mon-fri"}, "*/15 9-17 * * 1-5"),
        ({"minute": "5,10,11,12,40", "hour": "*/3"}, "5,10-12,40 */3 * * *"),
        ({"minute": "10-50/20"}, "10-50/20 * * * *"),
        ({"minute": "10,30"}, "10,30 * * * *"),
        ({"minute": "1-59/2"}, "1-59/2 * * * *"),
        ({"minute": 30, "hour": 7, "day_of_month": "1,15"}, "30 7 1,15 * *"),
        ({"minute": 0, "hour": 0, "day_of_month": "1", "month_of_year": "*/3"}, "0 0 1 */3 *"),
        ({"minute": 0, "hour": 12, "day_of_week": "sun,sat"}, "0 12 * * 0,6"),
        ({"minute": "*/20", "hour": "0-23/6"}, "*/20 */6 * * *"),
        ({"minute": 0, "hour": 12, "day_of_week": "0-6"}, "0 12 * * *"),
    ],
)
def test_crontab_fields_become_a_cron_expression(fields: dict[str, Any], cron: str) -> None:
    assert cron_of(crontab(**fields)) == cron
    translated = entry(schedule=crontab(**fields))
    assert (translated.kind, translated.cron, translated.period) == (ScheduleKind.CRON, cron, None)


@pytest.mark.parametrize(
    "fields",
    [
        {"minute": "*/15", "hour": "9-17", "day_of_week": "mon-fri"},
        {"minute": "5,10,11,12,40", "hour": "*/3", "month_of_year": "1-6"},
        {"minute": 30, "hour": 2},
        {"minute": 0, "hour": 0, "day_of_month": "31"},
        {"minute": "*/20", "hour": 23, "day_of_week": "sun"},
    ],
)
def test_the_cron_expression_fires_when_celery_would(fields: dict[str, Any]) -> None:
    """Celery's own crontab arithmetic, in the app's zone, and ours agree,
    firing after firing. The zone has no DST change: across one, Celery's
    ``remaining_estimate`` is an hour off (it adds a naive difference to an
    instant of the other offset), and ours fires a skipped wall time once,
    at the jump (tests/unit/policy/test_policy_cron.py)."""
    zone = ZoneInfo("Asia/Kolkata")  # UTC+05:30 all year
    app = Celery(set_as_current=False)
    app.conf.timezone = "Asia/Kolkata"
    clock = [datetime(2026, 1, 20, 10, 7, tzinfo=UTC).astimezone(zone)]
    beat = crontab(**fields, app=app, nowfun=lambda: clock[0])
    expr = cron_of(beat)
    ours = clock[0].astimezone(UTC)
    for _ in range(40):
        celery_next = (clock[0] + beat.remaining_estimate(clock[0])).astimezone(UTC)
        ours = next_cron_time(expr, "Asia/Kolkata", ours)
        assert ours == celery_next, expr
        clock[0] = celery_next.astimezone(zone)


def test_both_days_restricted_is_refused_naming_the_entry() -> None:
    with pytest.raises(InvalidInput) as caught:
        entry("payday", schedule=crontab(minute=0, hour=9, day_of_month="1", day_of_week="mon"))
    assert caught.value.field == "beat_schedule['payday'].schedule"
    assert "matching both" in caught.value.message


@pytest.mark.parametrize(
    "value",
    [timedelta(seconds=5), 5, 5.0, schedule(run_every=timedelta(seconds=5)), schedule(5)],
)
def test_timedeltas_numbers_and_schedules_become_periodic(value: object) -> None:
    translated = entry(schedule=value)
    assert translated.kind is ScheduleKind.PERIODIC
    assert translated.period == timedelta(seconds=5)
    assert translated.cooldown == timedelta(seconds=4.5) == cooldown_for(timedelta(seconds=5))
    assert translated.describe() == "every 5s"
    assert translated.key == "beat:e"


def test_the_cooldown_keeps_one_run_per_period() -> None:
    for period in (timedelta(seconds=1), timedelta(minutes=5), timedelta(days=1)):
        assert timedelta(0) < cooldown_for(period) < period


def test_solar_is_refused_with_the_reason() -> None:
    # solar() needs the ``ephem`` package to compute sun times, which the
    # refusal never asks for: the instance is built without its constructor
    sunset = solar.__new__(solar)
    sunset.event, sunset.lat, sunset.lon = "sunset", 48.85, 2.35
    with pytest.raises(InvalidInput) as caught:
        entry("lights", schedule=sunset)
    assert caught.value.field == "beat_schedule['lights'].schedule"
    assert "solar schedules (sunset at 48.85, 2.35) are not supported" in caught.value.message


def test_a_custom_schedule_class_is_refused() -> None:
    class EveryOther(schedule):
        pass

    with pytest.raises(InvalidInput, match="EveryOther schedules are not supported"):
        entry(schedule=EveryOther(10))


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"schedule": 0}, "schedule", "must be longer than zero"),
        ({"schedule": timedelta(seconds=-1)}, "schedule", "must be longer than zero"),
        ({}, "schedule", "is required"),
        ({"schedule": 5, "args": "abc"}, "args", "must be a list or a tuple"),
        ({"schedule": 5, "kwargs": [1]}, "kwargs", "must be a mapping"),
        ({"schedule": 5, "args": [object()]}, "args", "JSON-serialisable"),
        ({"schedule": 5, "every": 3}, "every", "unknown key"),
        ({"schedule": 5, "options": {"queue": "bad queue"}}, "options.queue", "not a valid"),
    ],
)
def test_bad_entries_name_the_entry_and_the_field(
    fields: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        entry("nightly", **fields)
    assert caught.value.field == f"beat_schedule['nightly'].{field}"


def test_a_missing_task_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        translate_entry("x", {"schedule": 5}, tz="UTC", route=to_default)
    assert caught.value.field == "beat_schedule['x'].task"


def test_arguments_are_kept_as_the_store_gives_them_back() -> None:
    translated = entry(schedule=5, args=(1, (2, 3)), kwargs={"a": (4,)})
    assert translated.args == (1, [2, 3])
    assert translated.kwargs == {"a": [4]}


def test_options_other_than_queue_warn_naming_entry_and_option() -> None:
    translated = entry(
        "report", schedule=60, options={"queue": "reports", "priority": 9, "expires": 30}
    )
    assert translated.queue == "reports"
    assert len(translated.warnings) == 2
    priority, expires = sorted(translated.warnings, key=lambda w: "expires" in w)
    assert priority.startswith("entry 'report': option 'priority' is not translated")
    assert expires.startswith("entry 'report': option 'expires' is not translated")
    assert not entry(schedule=60, options={"queue": "q"}).warnings


def test_every_refused_entry_is_named_and_none_is_returned() -> None:
    with pytest.raises(InvalidInput) as caught:
        translate_schedule(
            {
                "good": {"task": "a", "schedule": 5},
                "bad1": {"task": "a", "schedule": -5},
                "bad2": {"task": "a"},
            },
            tz="UTC",
            route=to_default,
        )
    assert caught.value.field == "beat_schedule"
    # one entry per line
    first, *each = caught.value.message.splitlines()
    assert first == "2 entries refused:"
    assert len(each) == 2 and "'bad1'" in each[0] and "'bad2'" in each[1]
    refused: list[InvalidInput] = []
    taken = translate_schedule(
        {"good": {"task": "a", "schedule": 5}, "bad": {"task": "a"}},
        tz="UTC",
        route=to_default,
        refused=refused,
    )
    assert [e.name for e in taken] == ["good"]
    assert [e.field for e in refused] == ["beat_schedule['bad'].schedule"]
    left = translate_schedule(
        {"good": {"task": "a", "schedule": 5}, "bad": {"task": "a"}},
        tz="UTC",
        route=to_default,
        exclude=["bad"],
    )
    assert [e.name for e in left] == ["good"]


def test_an_apps_zone_routes_and_cron_deadline() -> None:
    app = Celery(set_as_current=False)
    app.conf.timezone = "America/New_York"
    app.conf.task_routes = {"reports.*": {"queue": "reports"}}
    app.conf.beat_cron_starting_deadline = 120
    app.conf.beat_schedule = {
        "daily": {"task": "reports.daily", "schedule": crontab(minute=0, hour=6)},
        "ping": {"task": "health.ping", "schedule": 30},
        "pinned": {"task": "reports.weekly", "schedule": 30, "options": {"queue": "slow"}},
    }
    assert app_time_zone(app) == "America/New_York"
    entries = {e.name: e for e in app_entries(app)}
    assert (entries["daily"].queue, entries["daily"].tz) == ("reports", "America/New_York")
    assert entries["ping"].queue == "celery"  # Celery's task_default_queue
    assert entries["pinned"].queue == "slow"
    assert celery_route(app)("reports.x", {}) == "reports"
    # the deadline is only a cron notion in beat: a warning for cron entries
    assert any("beat_cron_starting_deadline=120" in w for w in entries["daily"].warnings)
    assert not entries["ping"].warnings
    assert entries["daily"].describe() == "cron '0 6 * * *' (America/New_York)"
