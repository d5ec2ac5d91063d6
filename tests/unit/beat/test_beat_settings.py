"""The ``swh_scheduler_monitor`` setting of ``celery beat -S swh``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from swh_like_scheduler.beat.scheduler import monitor_settings
from swh_like_scheduler.beat.sync import import_mode
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.monitor.duties import MonitorSettings


def test_default_and_off() -> None:
    assert monitor_settings(True) == MonitorSettings()
    assert monitor_settings(None) == MonitorSettings()
    assert monitor_settings(False) is None


def test_a_mapping_of_seconds_and_counts() -> None:
    settings = monitor_settings(
        {"republish_after": 120, "period": 5, "keep_runs": 7, "batch_size": 50}
    )
    assert settings is not None
    assert settings.republish_after == timedelta(seconds=120)
    assert settings.period == timedelta(seconds=5)
    assert settings.keep_runs == timedelta(days=7)
    assert settings.batch_size == 50
    off = monitor_settings({"republish_after": None})
    assert off is not None and off.republish_after is None


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("yes", "swh_scheduler_monitor"),
        ({"republish": 10}, "swh_scheduler_monitor.republish"),
        ({"period": "5s"}, "swh_scheduler_monitor.period"),
        ({"period": -1}, "swh_scheduler_monitor.period"),
        ({"period": 90}, "swh_scheduler_monitor.lock_ttl"),
    ],
)
def test_bad_values_name_the_field(value: object, field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        monitor_settings(value)
    assert raised.value.field == field


def test_the_beat_schedule_import_setting() -> None:
    assert import_mode(True) == import_mode(None) == "import"
    assert import_mode(False) == "off"
    assert import_mode("check") == "check"
    for wrong in ("yes", 1, 0, "True"):
        with pytest.raises(InvalidInput) as raised:
            import_mode(wrong)
        assert raised.value.field == "swh_scheduler_import_beat_schedule"
