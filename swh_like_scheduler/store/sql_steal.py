"""The steal protocol and the body's heartbeat: the store's half (DESIGN.md §4).

A run's ownership is renewed by the process that runs its body (the lease's
pings, or the heartbeat of every guarded run: :meth:`renew_runs`), never
inferred from the worker's main process. The monitor's steal step puts on
notice the owners silent for the ping timeout (by their last renewal, or by
their start when they never renewed) and, after the grace, ends their run
``lost`` and makes the task runnable again, moving the task's fencing
token on in the same transaction (the copy's token is stale from then on:
:meth:`current_fence`). Instants are the database's.

The monitor publishes its two settings (:meth:`publish_lease_terms`, one
row of ``lease_terms``) for the worker processes, which read them
(:meth:`lease_terms`) to fence themselves before it may take their runs
(:mod:`swh_like_scheduler.domain.fencing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput
from ..domain.fencing import LeaseTerms
from ..domain.model import OWNER_CLEARED, RunStatus, TaskRun
from ..domain.records import PINGED_LATE, STOLEN, Renewal, StealReport
from . import rows
from .interface import ApplyOutcome
from .sql_batch import among
from .sql_lease import _OPEN, LeaseMethods, _entry
from .tables import OPEN_RUN
from .tables import lease_terms as terms_t
from .tables import task as task_t
from .tables import task_run as run_t

#: the name of the monitor's row in ``lease_terms``
_TERMS = "monitor"


class StealMethods(LeaseMethods):
    """Steal expired ownerships; renew the runs a worker process holds."""

    def steal_expired_leases(
        self,
        *,
        ping_timeout: timedelta,
        grace: timedelta,
        apply: ApplyOutcome | None = None,
        limit: int = 1000,
    ) -> StealReport:
        if ping_timeout <= timedelta(0) or grace <= timedelta(0):
            raise InvalidInput("ping_timeout", "the ping timeout and the grace must be > 0")
        with self._write("steal expired leases") as conn:
            now = self._db_now(conn)
            # 1. owners past the ping timeout are put on notice: by their last
            # ping, or by their start when they have not pinged yet (found
            # from the open runs: a start does not write the indexed column)
            late = self._lock_skip(
                sa.select(task_t.c.id)
                .where(
                    task_t.c.owner_tag.is_not(None),
                    task_t.c.steal_start_at.is_(None),
                    task_t.c.owner_last_ping_at < now - ping_timeout,
                )
                .order_by(task_t.c.id)
                .limit(limit)
            )
            warned = [int(i) for i in conn.scalars(late)]
            warned += self._silent_since_start(conn, now - ping_timeout, limit - len(warned))
            if warned:
                conn.execute(
                    sa.update(task_t)
                    .where(task_t.c.id.in_(warned))
                    .values(
                        steal_start_at=now,
                        # in the steal step's index from now on
                        owner_last_ping_at=sa.func.coalesce(
                            task_t.c.owner_last_ping_at, task_t.c.owner_started_at
                        ),
                    )
                )
                for run in self._open_runs(conn, warned):
                    entry = _entry(
                        PINGED_LATE,
                        now,
                        worker=run.worker,
                        detail=f"no ping for {ping_timeout}; steal started",
                    )
                    self._add_history(conn, run, entry)
            # 2. owners whose grace ran out lose their run
            expired = self._lock_skip(
                sa.select(task_t.c.id)
                .where(
                    task_t.c.owner_last_ping_at.is_not(None),  # leases only
                    task_t.c.steal_start_at < now - grace,
                )
                .order_by(task_t.c.id)
                .limit(limit)
            )
            expired_ids = [int(i) for i in conn.scalars(expired)]
            stolen: list[TaskRun] = []
            open_runs = {r.task_id: r for r in self._open_runs(conn, expired_ids)}
            for task_id in expired_ids:
                owned = open_runs.get(task_id)
                if owned is None:  # ownership without an open run: just release it
                    conn.execute(
                        sa.update(task_t)
                        .where(task_t.c.id == task_id)
                        .values(**OWNER_CLEARED, fence=task_t.c.fence + 1)
                    )
                    continue
                ended = self._end_owned(
                    conn,
                    owned,
                    status=RunStatus.LOST,
                    now=now,
                    error=(
                        "taken from its copy: the process running its body gave no sign of"
                        f" life for {ping_timeout} plus a grace of {grace}"
                    ),
                    entry=_entry(STOLEN, now, worker=owned.worker, progress=owned.progress),
                    apply=apply,
                    runnable_now=True,
                    take=True,  # the copy's token is stale from now on
                )
                if ended is not None:
                    stolen.append(ended)
        return StealReport(db_now=now, warned=tuple(warned), stolen=tuple(stolen))

    def _silent_since_start(self, conn: sa.Connection, cutoff: datetime, limit: int) -> list[int]:
        """Owned tasks whose owner has not pinged since its start, which came
        before ``cutoff`` (locked, rows another transaction holds skipped)."""
        if limit <= 0:
            return []
        query = (
            sa.select(task_t.c.id)
            .select_from(run_t.join(task_t, task_t.c.id == run_t.c.task_id))
            .where(
                OPEN_RUN,
                run_t.c.scheduled < cutoff,  # the open runs' index
                task_t.c.owner_tag.is_not(None),
                task_t.c.owner_last_ping_at.is_(None),
                task_t.c.steal_start_at.is_(None),
                task_t.c.owner_started_at < cutoff,
            )
            .order_by(task_t.c.id)
            .limit(limit)
        )
        if self._capabilities.skip_locked:
            query = query.with_for_update(of=task_t, skip_locked=True)
        return [int(i) for i in conn.scalars(query)]

    # -- the body's heartbeat ---------------------------------------------------

    def renew_runs(self, held: Sequence[tuple[str, str]]) -> dict[str, Renewal]:
        owners = dict(held)
        if not owners:
            return {}
        answers = dict.fromkeys(owners, Renewal.TAKEN)  # a run deleted since: not ours
        with self._write("renew the runs of a worker process") as conn:
            now = self._db_now(conn)
            found = conn.execute(
                sa.select(run_t.c.backend_id, run_t.c.status, run_t.c.task_id, task_t.c.owner_tag)
                .join(task_t, task_t.c.id == run_t.c.task_id)
                .where(among(conn, run_t.c.backend_id, list(owners)))
            ).all()
            renewed: list[tuple[int, str]] = []
            for row in found:
                tag = owners[row.backend_id]
                if row.status in _OPEN:
                    if row.owner_tag == tag:
                        answers[row.backend_id] = Renewal.OK
                        renewed.append((int(row.task_id), tag))
                elif row.status != RunStatus.LOST.value:  # lost: taken away
                    answers[row.backend_id] = Renewal.FINISHED
            if renewed:
                conn.execute(
                    sa.update(task_t)
                    .where(sa.tuple_(task_t.c.id, task_t.c.owner_tag).in_(renewed))
                    .values(owner_last_ping_at=now, steal_start_at=None)
                )
        return answers

    def current_fence(self, task_id: int) -> int | None:
        with self._read("read a task's fencing token") as conn:
            value = conn.scalar(sa.select(task_t.c.fence).where(task_t.c.id == task_id))
        return None if value is None else int(value)

    # -- the monitor's settings, for the workers ----------------------------------

    def publish_lease_terms(
        self, *, ping_timeout: timedelta, grace: timedelta, holder: str
    ) -> LeaseTerms:
        if ping_timeout <= timedelta(0) or grace <= timedelta(0):
            raise InvalidInput("ping_timeout", "the ping timeout and the grace must be > 0")
        values = {
            "name": _TERMS,
            "ping_timeout": ping_timeout.total_seconds(),
            "grace": grace.total_seconds(),
            "holder": holder,
        }
        with self._write("publish the monitor's steal settings") as conn:
            now = self._db_now(conn)
            insert = self._upsert(terms_t).values(**values, published_at=now)
            changed = sa.or_(
                *(terms_t.c[name] != insert.excluded[name] for name in values if name != "name")
            )
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=[terms_t.c.name],
                    set_={name: insert.excluded[name] for name in (*values, "published_at")},
                    where=changed,  # the same settings again: nothing written
                )
            )
            row = conn.execute(sa.select(terms_t).where(terms_t.c.name == _TERMS)).one()
        return _terms(row)

    def lease_terms(self) -> LeaseTerms | None:
        with self._read("read the monitor's steal settings") as conn:
            row = conn.execute(sa.select(terms_t).where(terms_t.c.name == _TERMS)).first()
        return None if row is None else _terms(row)

    def _open_runs(self, conn: sa.Connection, task_ids: list[int]) -> list[TaskRun]:
        if not task_ids:
            return []
        query = sa.select(run_t).where(run_t.c.task_id.in_(task_ids), run_t.c.status.in_(_OPEN))
        return [rows.run_from_row(r._mapping) for r in conn.execute(self._lock(query))]


def _terms(row: sa.Row[Any]) -> LeaseTerms:
    return LeaseTerms(
        ping_timeout=timedelta(seconds=float(row.ping_timeout)),
        grace=timedelta(seconds=float(row.grace)),
        holder=str(row.holder),
        published_at=row.published_at,
    )
