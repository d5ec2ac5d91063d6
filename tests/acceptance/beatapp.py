"""A Celery beat user's app (``celery -A beatapp``): two ``beat_schedule``
entries, a timedelta of :data:`PERIOD` seconds and a crontab every minute,
both calling :func:`tick`, which appends ``LABEL UNIX-TIME`` to the file
``BEATAPP_OUT``: what really ran, whatever the scheduler's tables say.

Configured from the environment: ``BEATAPP_BROKER``, ``BEATAPP_QUEUE`` (the
entries' queue, one per test), ``BEATAPP_OUT``, and ``BEATAPP_IMPORT``
(``swh_scheduler_import_beat_schedule``: ``1``, ``0`` or ``check``).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from celery import Celery
from celery.schedules import crontab

PERIOD = 5
TASK = "beatapp.tick"

app = Celery("beatapp", broker=os.environ.get("BEATAPP_BROKER", "redis://127.0.0.1:6379/0"))
_queue = {"queue": os.environ.get("BEATAPP_QUEUE", "beatapp")}
app.conf.update(
    timezone="Europe/Paris",
    worker_send_task_events=True,
    task_send_sent_event=False,
    worker_hijack_root_logger=False,
    beat_schedule={
        "every-5s": {
            "task": TASK,
            "schedule": timedelta(seconds=PERIOD),
            "args": ("every-5s",),
            "options": _queue,
        },
        "every-minute": {
            "task": TASK,
            "schedule": crontab(),
            "args": ("every-minute",),
            "options": _queue,
        },
    },
    swh_scheduler_import_beat_schedule={"1": True, "0": False, "check": "check"}[
        os.environ.get("BEATAPP_IMPORT", "1")
    ],
)


@app.task(name=TASK)
def tick(label: str) -> None:
    with open(os.environ["BEATAPP_OUT"], "a") as out:
        out.write(f"{label} {time.time():.3f}\n")
