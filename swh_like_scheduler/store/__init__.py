"""Persistence of task types, tasks and runs behind one interface.

The names below are loaded on first use: importing a light part of the
package (``store.session``, ``store.values``, ``store.interface``) does not
load SQLAlchemy and its dialects, so a command line that only shows help, or
talks to a server, starts at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_names

if TYPE_CHECKING:
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

__getattr__ = lazy_names(
    __name__,
    {
        "make_engine": "engine",
        "missing_sqlite_file": "engine",
        "normalise_url": "engine",
        "Capabilities": "interface",
        "SchedulerStore": "interface",
        "TaskFilter": "interface",
        "SQLAlchemyStore": "sql",
    },
)


def open_store(url: str) -> SQLAlchemyStore:
    """A store on the database at ``url`` that owns (and closes) its engine."""
    from .sql import SQLAlchemyStore

    return SQLAlchemyStore.from_url(url)
