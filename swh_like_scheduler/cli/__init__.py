"""The ``swh scheduler`` command line (click)."""

from . import api, db, listener, monitor, runner, standalone, task, task_type
from .base import main, scheduler, swh

__all__ = [
    "api",
    "db",
    "listener",
    "main",
    "monitor",
    "runner",
    "scheduler",
    "standalone",
    "swh",
    "task",
    "task_type",
]
