"""A task that sleeps or burns CPU for a given time and fails at a given rate.

Used by the tests, the simulator and the benchmarks; also a template for
writing a task type of your own.
"""

from __future__ import annotations

import random
import time
from typing import Any

from celery import Task, shared_task

from swh_like_scheduler.worker import SchedulerTask

TASK_NAME = "swh_like_workers.sleep.sleep"


class SimulatedFailure(RuntimeError):
    """Raised on purpose, at the rate asked for."""


@shared_task(name=TASK_NAME, bind=True, base=SchedulerTask)
def sleep(
    self: Task,
    duration: float = 0.0,
    failure_rate: float = 0.0,
    eventful_rate: float = 1.0,
    cpu: bool = False,
    seed: int | None = None,
) -> dict[str, Any]:
    """Wait (or spin the CPU) for ``duration`` seconds, then fail with
    probability ``failure_rate``, else report an eventful run with
    probability ``eventful_rate`` and an uneventful one otherwise."""
    rng = random.Random(seed)
    deadline = time.monotonic() + max(0.0, float(duration))
    if cpu:
        while time.monotonic() < deadline:
            sum(i * i for i in range(1000))
    else:
        time.sleep(max(0.0, deadline - time.monotonic()))
    if rng.random() < failure_rate:
        raise SimulatedFailure(f"simulated failure (rate {failure_rate})")
    status = "eventful" if rng.random() < eventful_rate else "uneventful"
    return {"status": status, "duration": duration, "worker": self.request.hostname}


def register() -> dict[str, Any]:
    """Entry point of the ``swh.workers`` group: the task modules to load in a
    worker and the task types to create with ``swh scheduler task-type register``."""
    return {
        "task_modules": [__name__],
        "task_types": [
            {
                "type": "sleep",
                "backend_name": TASK_NAME,
                "description": "Sleep or burn CPU for a while, failing at a given rate",
                "default_interval": "1 hour",
                "min_interval": "1 min",
                "max_interval": "1 day",
                "backoff_factor": 2.0,
                "max_queue_length": 10_000,
            }
        ],
    }
