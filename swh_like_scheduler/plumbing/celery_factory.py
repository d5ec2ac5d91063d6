"""Building the Celery app the platform uses (never at import time).

``celery -A swh_like_scheduler.celery_app`` points at the one module that
calls :func:`make_app` when imported; everything else builds an app
explicitly from its settings, or takes the user's own (``--app``).
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from importlib import import_module
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from ..domain.exceptions import InvalidInput

if TYPE_CHECKING:
    from celery import Celery

WORKERS_GROUP = "swh.workers"
#: the platform's own settings (plain values, installed with the package)
PLATFORM_CONFIG = "swh_like_scheduler.celeryconfig"
#: the environment variables a worker's app reads on top of its modules
ENV_SETTINGS = {
    "SWH_SCHEDULER_BROKER_URL": "broker_url",
    "SWH_SCHEDULER_RESULT_BACKEND": "result_backend",
    "SWH_SCHEDULER_LEASE_PING": "swh_scheduler_lease_ping",
}


def worker_registrations() -> list[tuple[str, dict[str, Any]]]:
    """``(entry point name, registration)`` of every installed worker package."""
    return [(ep.name, dict(ep.load()())) for ep in entry_points(group=WORKERS_GROUP)]


def module_settings(module: types.ModuleType) -> dict[str, Any]:
    """The settings a configuration module holds: its public names that are
    neither modules, classes nor functions (as Celery reads one)."""
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType | type | types.FunctionType)
    }


def environment_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings ``environ`` gives (:data:`ENV_SETTINGS`), checked."""
    found: dict[str, Any] = {}
    for variable, name in ENV_SETTINGS.items():
        value = environ.get(variable)
        if not value:
            continue
        if name == "swh_scheduler_lease_ping":
            try:
                seconds = float(value)
            except ValueError:
                raise InvalidInput(variable, f"{value!r} is not a number of seconds") from None
            if not seconds > 0:
                raise InvalidInput(variable, f"{value!r} must be longer than zero")
            if not math.isfinite(seconds):  # a lease never renewed: taken from its run
                raise InvalidInput(variable, f"{value!r} is not a finite number of seconds")
            found[name] = seconds
        else:
            found[name] = value
    return found


def make_app(
    *,
    config_module: str | None = PLATFORM_CONFIG,
    user_module: str | None = None,
    environ: Mapping[str, str] | None = None,
    broker_url: str | None = None,
    load_workers: bool = True,
    **overrides: Any,
) -> Celery:
    """A Celery app configured, each layer over the one before, from
    ``config_module`` (the platform's settings; ``None``: Celery's own
    defaults), ``user_module`` (a conventional ``celeryconfig``, skipped
    when it cannot be imported), the variables of ``environ``
    (:data:`ENV_SETTINGS`), then ``broker_url`` and ``overrides``; with
    ``load_workers``, the task modules of the installed worker packages
    are imported so their tasks are registered."""
    from celery import Celery

    from .kombu_redis import install as keep_workers_through_redis_loss

    keep_workers_through_redis_loss()  # kombu's AttributeError exit: see .kombu_redis
    app = Celery("swh_like_scheduler")
    settings: dict[str, Any] = {}
    if config_module:
        settings.update(module_settings(import_module(config_module)))
    if user_module:
        try:
            module = import_module(user_module)
        except ModuleNotFoundError as error:
            if error.name != user_module:
                raise  # the module exists and fails to import something
        else:
            settings.update(module_settings(module))
    if environ is not None:
        settings.update(environment_settings(environ))
    if broker_url:
        settings["broker_url"] = broker_url
    settings.update(overrides)
    app.conf.update(settings)
    if load_workers:
        modules = [
            module
            for _, registration in worker_registrations()
            for module in registration.get("task_modules", ())
        ]
        app.conf.include = [*app.conf.include, *modules]
    return app
