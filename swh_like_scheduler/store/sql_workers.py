"""Workers seen by the listener (the ``worker`` table): each name's latest
event, and the main processes seen under it.

The listener records worker events (heartbeat, online, offline) in batches.
Per name, the stored row is locked (PostgreSQL; SQLite's write transaction
excludes every other writer), the batch's events of that name are folded
into it in time order by :func:`~swh_like_scheduler.policy.workers.see_worker`
(pure), and the result is written back with one statement for the batch.
The restarts and duplicates the fold finds are returned: what a restart
does to the runs of the process that went away is the caller's
(:meth:`end_worker_runs`); a duplicate ends nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from ..domain.records import BlindWindow, WorkerChange, WorkerSighting, WorkerState
from ..policy.blind import fold_window
from ..policy.workers import see_workers
from .sql_base import SQLBase
from .tables import worker as worker_t

_COLUMNS = (
    "last_heartbeat_at",
    "online",
    "freq",
    "pid",
    "pid_since",
    "other_pid",
    "other_seen_at",
)


class WorkerMethods(SQLBase):
    """Recording worker events; listing workers."""

    def record_worker_sightings(self, sightings: Sequence[WorkerSighting]) -> list[WorkerChange]:
        by_name: dict[str, list[WorkerSighting]] = {}
        for sighting in sightings:
            by_name.setdefault(sighting.hostname, []).append(sighting)
        if not by_name:
            return []
        names = sorted(by_name)  # one lock order for every writer
        insert = self._upsert(worker_t)
        stmt = insert.on_conflict_do_update(
            index_elements=[worker_t.c.hostname],
            set_={name: insert.excluded[name] for name in _COLUMNS},
            # (a row inserted by another writer since it was read: the
            # latest event wins, as when rows were written blind)
            where=worker_t.c.last_heartbeat_at <= insert.excluded.last_heartbeat_at,
        )
        changes: list[WorkerChange] = []
        with self._write("record worker events") as conn:
            query = sa.select(worker_t).where(worker_t.c.hostname.in_(names))
            stored = {
                row.hostname: worker_state(row._mapping)
                for row in conn.execute(self._lock(query.order_by(worker_t.c.hostname)))
            }
            values = []
            for name in names:
                before = stored.get(name)
                after, found = see_workers(before, by_name[name])
                changes.extend(found)
                if after is not None and after != before:
                    values.append(_row(after))
            if values:
                conn.execute(stmt, values)
        return changes

    def mark_blind_workers(self, windows: Sequence[BlindWindow]) -> list[WorkerState]:
        by_name: dict[str, list[BlindWindow]] = {}
        for window in windows:
            by_name.setdefault(window.hostname, []).append(window)
        if not by_name:
            return []
        changed: list[WorkerState] = []
        with self._write("record workers without task events") as conn:
            query = sa.select(worker_t).where(worker_t.c.hostname.in_(sorted(by_name)))
            for row in conn.execute(self._lock(query.order_by(worker_t.c.hostname))).all():
                before = worker_state(row._mapping)
                after = before
                for window in by_name[before.hostname]:
                    after = fold_window(after, window)
                if after == before:
                    continue
                conn.execute(
                    sa.update(worker_t)
                    .where(worker_t.c.hostname == after.hostname)
                    .values(
                        blind_since=after.blind_since,
                        blind_until=after.blind_until,
                        blind_tasks=list(after.blind_tasks)
                        if after.blind_tasks is not None
                        else None,
                    )
                )
                changed.append(after)
        return changed

    def get_workers(self) -> list[WorkerState]:
        with self._read("list workers") as conn:
            found = conn.execute(sa.select(worker_t).order_by(worker_t.c.hostname)).all()
        return [worker_state(r._mapping) for r in found]


def _row(state: WorkerState) -> dict[str, Any]:
    return {"hostname": state.hostname, **{name: getattr(state, name) for name in _COLUMNS}}


def worker_state(row: Any) -> WorkerState:
    """A ``worker`` row as a :class:`WorkerState`."""
    return WorkerState(
        hostname=row["hostname"],
        last_heartbeat_at=row["last_heartbeat_at"],
        online=bool(row["online"]),
        freq=row["freq"],
        pid=row["pid"],
        pid_since=row["pid_since"],
        other_pid=row["other_pid"],
        other_seen_at=row["other_seen_at"],
        blind_since=row["blind_since"],
        blind_until=row["blind_until"],
        blind_tasks=tuple(row["blind_tasks"]) if row["blind_tasks"] is not None else None,
        clock_offset=row["clock_offset"],
    )
