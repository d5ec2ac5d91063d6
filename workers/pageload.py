"""A visit loader for the origin-visit scheduler: a web page as an origin.

Task type ``load-page`` (visit type ``page``): ``schedule-recurrent`` sends
it the ``url`` of each listed origin of visit type ``page``. A visit fetches
the page (``webcheck.fetch``: http and https only, bounded in time) and
reports, through the ``VisitTask`` base, a snapshot id made of the first 40
hexadecimal digits of the body's SHA-256: the scheduler compares it with the
last one (a different digest is an eventful visit). A page that is gone (404,
410) is ``not_found``; any other failure raises (a failed visit).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from swh_like_scheduler.worker.visit import VisitTask

from .webcheck import GONE, fetch, url_problem

TASK_NAME = "swh_like_workers.pageload.load_page"
TIMEOUT = 30.0


@shared_task(base=VisitTask, name=TASK_NAME)
def load_page(url: str, **extra: Any) -> dict[str, Any]:
    """Visit the page ``url``; extra loader arguments are accepted and unused."""
    problem = url_problem(url)
    if problem is not None:
        raise ValueError(problem)
    fetched = fetch(url, timeout=TIMEOUT)
    if fetched.http_status in GONE:
        return {"status": "not_found"}
    if fetched.digest is None:  # (fetch only omits it for a gone page or a 304)
        raise ValueError(f"{url}: HTTP {fetched.http_status} without a body")
    return {"snapshot_id": fetched.digest[:40]}


def register() -> dict[str, Any]:
    """Entry point of the ``swh.workers`` group (see :mod:`swh_like_workers.sleep`)."""
    return {
        "task_modules": [__name__],
        "task_types": [
            {
                "type": "load-page",
                "backend_name": TASK_NAME,
                "description": "Visit a web page as an origin (visit type page)",
                "max_queue_length": 1000,
                "max_expected_duration": "30 s",
                "max_allowed_duration": "5 min",
            }
        ],
    }
