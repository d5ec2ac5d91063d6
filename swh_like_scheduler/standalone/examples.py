"""The installed task types, and a demo mix of example tasks.

About 300 tasks of the three shipped types, with every kind of schedule
(adaptive, periodic, cron, one-shot), some failing now and then, a high
priority class, and more work than the demo's workers can do: within two
minutes a newcomer sees deadlines missed, WARNING and ERROR conditions with
their reasons, retries and back-pressure.

Task types come from the ``swh.workers`` entry points, exactly as
``swh scheduler task-type register`` creates them. Example tasks are built
with :func:`~swh_like_scheduler.intake.builders.task_from_input`, so they go through
the policy engine's validation like any task a user adds.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..domain.model import Task, TaskType
from ..intake.builders import task_from_input, task_type_from_input
from ..plumbing.celery_factory import worker_registrations
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


#: seed of the demo's mix: every first run of ``standalone`` shows the same
DEMO_SEED = 2026


def _sleep_examples(now: datetime) -> list[dict[str, Any]]:
    """About 280 sleep tasks: more work than the demo's two worker slots can
    do, so deadlines are missed and conditions move within two minutes."""
    rng = random.Random(DEMO_SEED)

    def spread(seconds: float) -> str:  # a first run within the next ``seconds``
        return (now + timedelta(seconds=round(rng.uniform(0, seconds)))).isoformat()

    def work(failing: float = 0.0) -> dict[str, Any]:
        return {
            "duration": round(rng.uniform(0.3, 2.5), 1),
            "failure_rate": rng.choice([0.0, 0.0, 0.0, failing]),
            "eventful_rate": 0.5,
        }

    tasks: list[dict[str, Any]] = []
    # adaptive: every 1-3 minutes, backing off while nothing changes
    for n in range(120):
        interval = rng.choice(["1 min", "2 min", "3 min"])
        tasks.append(
            {
                "key": f"sleep-adaptive-{n}",
                "interval": interval,
                "next_run": spread(60),
                "kwargs": work(failing=0.3),
            }
        )
    # periodic: fresh within the period, runs at least `cooldown` apart
    for n in range(60):
        period = rng.choice([30, 60, 120])
        tasks.append(
            {
                "key": f"sleep-periodic-{n}",
                "period": f"{period} s",
                "cooldown": f"{period // 2} s",
                "kwargs": work(failing=0.5),
            }
        )
    # cron: every minute or two, each firing to be done within 45 s
    for n in range(30):
        tasks.append(
            {
                "key": f"sleep-cron-{n}",
                "cron": rng.choice(["* * * * *", "*/2 * * * *"]),
                "cron_max_duration": "45 s",
                "kwargs": work(),
            }
        )
    # high priority: dispatched before the normal class whatever their deadlines
    for n in range(10):
        tasks.append(
            {
                "key": f"sleep-high-{n}",
                "interval": "1 min",
                "priority": "high",
                "kwargs": {"duration": 0.5, "eventful_rate": 1.0},
            }
        )
    # a burst of one-shot jobs over the next 90 s, each due within 30 s
    for n in range(60):
        tasks.append(
            {
                "key": f"sleep-oneshot-{n}",
                "policy": "oneshot",
                "next_run": spread(90),
                "max_delay": "30 s",
                "kwargs": work(failing=0.2),
            }
        )
    return tasks


def _notify_examples(now: datetime) -> list[dict[str, Any]]:
    """Twenty notifications at instants over the next two minutes (seed 004)."""
    return [
        {
            "key": f"notify-{n}",
            "policy": "oneshot",
            "next_run": (now + timedelta(seconds=6 * n + 5)).isoformat(),
            "max_delay": "1 min",
            "kwargs": {
                "queue": NOTIFICATION_QUEUE,
                "payload": {"message": f"reminder {n} from swh scheduler standalone"},
                "key": f"{KEY_PREFIX}notify-{n}",
            },
        }
        for n in range(20)
    ]


def _check_page_examples(now: datetime) -> list[dict[str, Any]]:
    """A few pages to watch; one is unreachable on purpose (its runs fail and
    its retries wait their turn)."""
    urls = [
        "https://www.softwareheritage.org/",
        "https://docs.celeryq.dev/",
        "https://example.org/",
        "http://127.0.0.1:9/unreachable",
    ]
    return [{"key": f"check-page-{n}", "args": [url]} for n, url in enumerate(urls)]


#: example builders per task type (types not installed get none)
EXAMPLES = {
    "sleep": _sleep_examples,
    "notify": _notify_examples,
    "check-page": _check_page_examples,
}


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
