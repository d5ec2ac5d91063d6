"""The store of a simulation, observed: each claim is reported to the
recorder, and the types the store would announce to sleeping runners
(PostgreSQL's NOTIFY) are kept for the simulated runner; the tasks it
writes are noted for the condition watch and the monitor's demand measure.

Two stores: the store held in memory (:class:`MemorySimStore`, the
default), checked by the SQL store's contract suite for every call a
simulation makes and giving the same results on the hand-computed worlds,
and the SQL store
(:class:`SimStore`, on a private SQLite file, ``db_url``
:data:`PRIVATE_SQLITE`, or on an empty database).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..domain.model import Claimed
from ..domain.records import Skip
from ..store.memory import MemoryStore
from .demand import KeptDemand

if TYPE_CHECKING:
    from .results import Recorder

#: the ``db_url`` of a simulation on the store held in memory (the default)
MEMORY = "memory"
#: the ``db_url`` of a simulation on a private SQLite file
PRIVATE_SQLITE = "sqlite"


def store_named(db_url: str | None) -> str:
    """What a simulation with this ``db_url`` runs on, in words."""
    if db_url is None or db_url == MEMORY:
        return "the store held in memory"
    if db_url == PRIVATE_SQLITE:
        return "a private SQLite file"
    return "the database of --sim-db-url"


class Observed:
    """What a simulation observes of its store (a mixin before the store)."""

    recorder: Recorder
    announced: set[str]
    #: the ids of the tasks claimed, or whose runs' events were recorded,
    #: since the last sample (:class:`.watch.ConditionWatch` reads only those)
    changed: set[int]
    #: the task of each run claimed, by the run's backend id
    run_tasks: dict[str, int]
    #: the type and should_start_by of each run claimed and not started
    #: yet, by the run's backend id
    run_deadlines: dict[str, tuple[str, datetime]]

    def written(self, ids: Iterable[int]) -> None:
        """The tasks ``ids`` were written (the demand measure's hint)."""

    def claim_ready_tasks(self, task_type: str, **kwargs: Any) -> list[Claimed]:
        claimed: list[Claimed] = super().claim_ready_tasks(task_type, **kwargs)  # type: ignore[misc]
        if claimed:
            self.recorder.claimed(task_type, kwargs["now"], [c.deadline for c in claimed])
            self.written(c.task_id for c in claimed)
            for c in claimed:
                self.changed.add(c.task_id)
                self.run_tasks[c.backend_id] = c.task_id
                self.run_deadlines[c.backend_id] = (task_type, c.deadline)
        return claimed

    def skip_missed_firings(self, task_type: str, **kwargs: Any) -> list[Skip]:
        skips: list[Skip] = super().skip_missed_firings(task_type, **kwargs)  # type: ignore[misc]
        self.recorder.events["skipped"] += len(skips)
        ids = [s.task.id for s in skips if s.task.id is not None]
        self.changed.update(ids)
        self.written(ids)
        return skips


class SimStore(Observed, KeptDemand):
    """The SQL store, observed; the demand kept per task
    (:class:`.demand.KeptDemand`)."""

    def written(self, ids: Iterable[int]) -> None:
        KeptDemand.written(self, ids)

    def _announce(self, conn: sa.Connection, type_names: Any) -> None:
        names = set(type_names)
        self.announced |= names
        super()._announce(conn, names)


class MemorySimStore(Observed, MemoryStore):
    """The store held in memory, observed."""

    def _announce(self, type_names: Iterable[str]) -> None:
        self.announced |= set(type_names)
