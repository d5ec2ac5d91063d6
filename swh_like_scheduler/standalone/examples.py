"""The installed task types, and a few example tasks that run within a minute.

Task types come from the ``swh.workers`` entry points, exactly as
``swh scheduler task-type register`` creates them. Example tasks are built
with :func:`~swh_like_scheduler.builders.task_from_input`, so they go through
the policy engine's validation like any task a user adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..builders import task_from_input, task_type_from_input
from ..celery_factory import worker_registrations
from ..model import Task, TaskType
from ..store import SchedulerStore

#: Queue the example notification is published to.
NOTIFICATION_QUEUE = "swh-standalone-notifications"
#: Client-key prefix of the example tasks.
KEY_PREFIX = "standalone-example-"


def register_task_types(store: SchedulerStore) -> list[str]:
    """Create the task types the installed worker packages declare (existing
    ones are left as they are); the names of the types created."""
    declared = [
        task_type_from_input(dict(spec))
        for _, registration in worker_registrations()
        for spec in registration.get("task_types", ())
    ]
    existing = {t.type for t in store.get_task_types()}
    created = []
    for task_type in declared:
        if task_type.type in existing:
            continue
        store.create_task_type(task_type)
        existing.add(task_type.type)
        created.append(task_type.type)
    return created


def _sleep_examples(now: datetime) -> list[dict[str, Any]]:
    soon = (now + timedelta(seconds=10)).isoformat()
    return [
        # adaptive: every minute (the type's shortest interval), backing off
        # when uneventful; one of them fails now and then
        {"key": "sleep-adaptive-a", "interval": "1 min", "kwargs": {"duration": 2}},
        {
            "key": "sleep-adaptive-b",
            "interval": "1 min",
            "next_run": soon,
            "kwargs": {"duration": 1, "failure_rate": 0.3, "eventful_rate": 0.5},
        },
        # periodic: at most once per period, at least `cooldown` apart
        {
            "key": "sleep-periodic-20s",
            "period": "20 s",
            "cooldown": "10 s",
            "kwargs": {"duration": 1},
        },
        {
            "key": "sleep-periodic-30s-flaky",
            "period": "30 s",
            "cooldown": "15 s",
            "kwargs": {"duration": 3, "failure_rate": 0.5},
        },
        {
            "key": "sleep-periodic-45s-cpu",
            "period": "45 s",
            "cooldown": "30 s",
            "kwargs": {"duration": 2, "cpu": True},
        },
        # cron: every minute, to be done within 30 s of each firing
        {
            "key": "sleep-cron-every-minute",
            "cron": "* * * * *",
            "cron_max_duration": "30 s",
            "kwargs": {"duration": 2},
        },
    ]


def _notify_examples(now: datetime) -> list[dict[str, Any]]:
    return [
        {
            "key": "notify-in-30s",
            "policy": "oneshot",
            "next_run": (now + timedelta(seconds=30)).isoformat(),
            "max_delay": "1 min",
            "kwargs": {
                "queue": NOTIFICATION_QUEUE,
                "payload": {"message": "hello from swh scheduler standalone"},
                "key": f"{KEY_PREFIX}notify-in-30s",
            },
        }
    ]


#: example builders per task type (types not installed get none)
EXAMPLES = {"sleep": _sleep_examples, "notify": _notify_examples}


def example_tasks(types: Mapping[str, TaskType], now: datetime) -> list[Task]:
    """The example tasks of the types in ``types``, validated by the policy engine."""
    tasks = []
    for name, build in EXAMPLES.items():
        task_type = types.get(name)
        if task_type is None:
            continue
        for values in build(now):
            values = {**values, "type": name, "key": KEY_PREFIX + values["key"]}
            tasks.append(task_from_input(values, task_type, now=now))
    return tasks


def create_examples(store: SchedulerStore, now: datetime) -> list[Task]:
    """Create the example tasks when the database has no task at all."""
    if store.count_tasks() > 0:
        return []
    types = {t.type: t for t in store.get_task_types()}
    return store.create_tasks(example_tasks(types, now), now=now)
