"""A Celery app whose one task notes what really ran (``celery -A clockapp``):
:func:`note` appends ``LABEL CELERY-ID UNIX-TIME`` to the file ``CLOCKAPP_OUT``
(the worker's own clock).

Configured from the environment: ``CLOCKAPP_BROKER``, ``CLOCKAPP_QUEUE``,
``CLOCKAPP_OUT``."""

from __future__ import annotations

import os
import time

from celery import Celery

TASK = "clockapp.note"

app = Celery("clockapp", broker=os.environ.get("CLOCKAPP_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.update(
    worker_send_task_events=True,
    task_send_sent_event=False,
    worker_hijack_root_logger=False,
    task_default_queue=os.environ.get("CLOCKAPP_QUEUE", "clockapp"),
)


@app.task(bind=True, name=TASK)
def note(self, label: str) -> None:  # type: ignore[no-untyped-def]
    # the worker's clock: the true one unless the test skews the worker's
    with open(os.environ["CLOCKAPP_OUT"], "a") as out:
        out.write(f"{label} {self.request.id} {time.time():.3f}\n")
