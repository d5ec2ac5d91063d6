"""Persistence of task types, tasks and runs behind one interface."""

from __future__ import annotations

from .engine import make_engine, missing_sqlite_file, normalise_url
from .interface import Capabilities, SchedulerStore, TaskFilter
from .sql import SQLAlchemyStore

__all__ = [
    "Capabilities",
    "SQLAlchemyStore",
    "SchedulerStore",
    "TaskFilter",
    "make_engine",
    "missing_sqlite_file",
    "normalise_url",
    "open_store",
]


def open_store(url: str) -> SQLAlchemyStore:
    """A store on the database at ``url`` that owns (and closes) its engine."""
    return SQLAlchemyStore.from_url(url)
