"""A store held in one process's memory.

:class:`MemoryStore` keeps task types, tasks, runs and dispatch batches in
dictionaries, with the semantics the store protocols document
(:mod:`..interface`), checked by the same contract suite as the SQL store
(``tests/integration/contract``). Nothing is written anywhere: its rows go
with the object. It is meant for one process that owns its whole world,
such as a simulation or a forecast (:mod:`...simulator`), where a database
spends most of its time on statements rather than on work.

It holds the roles of task types and tasks, claims and runs so far; the
other roles (leases, the monitor's duties, the census, origins, jobs, bulk
actions, the console's reads) are not held yet, and the contract suite says
which of its tests it skips for that reason.
"""

from __future__ import annotations

from .edit import EditMethods
from .retention import RetentionMethods


class MemoryStore(EditMethods, RetentionMethods):
    """Task types, tasks, claims and runs held in memory."""


__all__ = ["MemoryStore"]
