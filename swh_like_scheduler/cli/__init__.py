"""The ``swh scheduler`` command line (click)."""

from . import db, task, task_type
from .base import main, scheduler, swh

__all__ = ["db", "main", "scheduler", "swh", "task", "task_type"]
