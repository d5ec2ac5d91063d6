"""Building the Celery app the platform uses (never at import time).

``celery -A swh_like_scheduler.celery_app`` points at the one module that
calls :func:`make_app` when imported; everything else builds an app
explicitly from its settings.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery import Celery

WORKERS_GROUP = "swh.workers"


def worker_registrations() -> list[tuple[str, dict[str, Any]]]:
    """``(entry point name, registration)`` of every installed worker package."""
    return [(ep.name, dict(ep.load()())) for ep in entry_points(group=WORKERS_GROUP)]


def make_app(
    *,
    config_module: str | None = "celeryconfig",
    broker_url: str | None = None,
    load_workers: bool = True,
    **overrides: Any,
) -> Celery:
    """A Celery app configured from ``config_module`` (the conventional
    ``celeryconfig``, skipped if it cannot be imported), then ``broker_url``
    and ``overrides``; with ``load_workers``, the task modules of the
    installed worker packages are imported so their tasks are registered."""
    from celery import Celery

    app = Celery("swh_like_scheduler")
    if config_module:
        try:
            import_module(config_module)
        except ImportError:
            pass
        else:
            app.config_from_object(config_module)
    if broker_url:
        app.conf.broker_url = broker_url
    app.conf.update(overrides)
    if load_workers:
        modules = [
            module
            for _, registration in worker_registrations()
            for module in registration.get("task_modules", ())
        ]
        app.conf.include = [*app.conf.include, *modules]
    return app
