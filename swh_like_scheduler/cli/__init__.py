"""The ``swh scheduler`` command line (click)."""

from . import (
    api,
    beat,
    db,
    edit,
    index,
    job,
    listener,
    monitor,
    origin,
    runner,
    simulate,
    standalone,
    task,
    task_bulk,
    task_type,
    task_why,
)
from .base import main, scheduler, swh

__all__ = [
    "api",
    "beat",
    "db",
    "edit",
    "index",
    "job",
    "listener",
    "main",
    "monitor",
    "origin",
    "runner",
    "scheduler",
    "simulate",
    "standalone",
    "swh",
    "task",
    "task_bulk",
    "task_type",
    "task_why",
]
