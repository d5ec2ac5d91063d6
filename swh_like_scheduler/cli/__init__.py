"""The ``swh scheduler`` command line (click)."""

from . import (
    api,
    beat,
    db,
    index,
    job,
    listener,
    monitor,
    runner,
    simulate,
    standalone,
    task,
    task_type,
)
from .base import main, scheduler, swh

__all__ = [
    "api",
    "beat",
    "db",
    "index",
    "job",
    "listener",
    "main",
    "monitor",
    "runner",
    "scheduler",
    "simulate",
    "standalone",
    "swh",
    "task",
    "task_type",
]
