"""The optional Redis index of waiting tasks (seed 001's Schedulinator):
runners find the next ready tasks in Redis sorted sets instead of the
database, which stays the truth (see :mod:`.redis_index`, :mod:`.sync`,
:mod:`.rebuild`, :mod:`.store`)."""

from __future__ import annotations

from .rebuild import rebuild
from .redis_index import CLAIM_TIMEOUT, IndexUnavailable, RedisIndex
from .store import IndexedStore
from .sync import Drift, drift, file_tasks, repair

__all__ = [
    "CLAIM_TIMEOUT",
    "Drift",
    "IndexUnavailable",
    "IndexedStore",
    "RedisIndex",
    "drift",
    "file_tasks",
    "rebuild",
    "repair",
]
