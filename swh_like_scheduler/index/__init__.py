"""The optional Redis index of waiting tasks (seed 001's Schedulinator):
runners find the next ready tasks in Redis sorted sets instead of the
database, which stays the truth (see :mod:`.redis_index`, :mod:`.sync`,
:mod:`.rebuild`, :mod:`.store`)."""

from __future__ import annotations

from .rebuild import rebuild
from .redis_index import CLAIM_TIMEOUT, IndexUnavailable, RedisIndex
from .store import IndexedStore
from .sync import Drift, Strays, drift, file_tasks, repair, strays

__all__ = [
    "CLAIM_TIMEOUT",
    "Drift",
    "IndexUnavailable",
    "IndexedStore",
    "RedisIndex",
    "Strays",
    "drift",
    "file_tasks",
    "rebuild",
    "repair",
    "strays",
]
