"""Builders for the policy tests: small task types and tasks with sane defaults."""

from __future__ import annotations

import random
from datetime import UTC, datetime, time, timedelta
from typing import Any

from swh_like_scheduler.domain.model import BlackoutPeriod, ScheduleKind, Task, TaskType

T0 = datetime(2024, 6, 3, 12, 0, tzinfo=UTC)  # a Monday, no DST change nearby
MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def at(hours: float = 0.0, *, base: datetime = T0) -> datetime:
    """``base`` shifted by ``hours``."""
    return base + timedelta(hours=hours)


def make_type(**changes: Any) -> TaskType:
    values: dict[str, Any] = {"type": "load-git", "backend_name": "swh.loader.git.tasks.Update"}
    values.update(changes)
    return TaskType(**values)


def adaptive_type(**changes: Any) -> TaskType:
    values: dict[str, Any] = {
        "default_interval": DAY,
        "min_interval": 12 * HOUR,
        "max_interval": 64 * DAY,
        "backoff_factor": 2.0,
    }
    values.update(changes)
    return make_type(**values)


_KIND_DEFAULTS: dict[ScheduleKind, dict[str, Any]] = {
    ScheduleKind.ONESHOT: {},
    ScheduleKind.PERIODIC: {"period": DAY},
    ScheduleKind.CRON: {"cron": "0 3 * * *", "cron_max_duration": 2 * HOUR},
    ScheduleKind.ADAPTIVE: {"current_interval": DAY},
}


def make_task(kind: ScheduleKind | str = ScheduleKind.PERIODIC, **changes: Any) -> Task:
    kind = ScheduleKind(kind)
    values: dict[str, Any] = {
        "type": "load-git",
        "next_run": T0,
        "deadline": T0,
        "schedule_kind": kind,
        "created_at": T0,
        "id": 7,
    }
    values.update(_KIND_DEFAULTS[kind])
    values.update(changes)
    return Task(**values)


def window(start: str, end: str) -> BlackoutPeriod:
    return BlackoutPeriod(time.fromisoformat(start), time.fromisoformat(end))


def rng(seed: int = 1) -> random.Random:
    return random.Random(seed)
